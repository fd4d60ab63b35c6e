// The kernel that hands a replay its random numbers' (seed, offset): see cuda/graph.cpp.
#include "cuda/runtime/check.h"
#include "cuda/graph/graph_kernels.h"

namespace ember::cuda {
namespace {

__global__ void write_seed_and_offset(uint64_t* pair, uint64_t seed, uint64_t offset) {
  pair[0] = seed;
  pair[1] = offset;
}

}  // namespace

void launch_write_seed_and_offset(uint64_t* pair, uint64_t seed, uint64_t offset, cudaStream_t stream) {
  write_seed_and_offset<<<1, 1, 0, stream>>>(pair, seed, offset);
  check_launch("CudaGraph::replay");
}

}  // namespace ember::cuda
