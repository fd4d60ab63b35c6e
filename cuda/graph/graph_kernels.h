// The one kernel CUDA graph replay needs (cuda/graph/graph.cu), on raw pointers for g++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ember::cuda {

// Writes (seed, offset) to the device pair a captured graph's random kernels read, queued on
// `stream` before the replay: a kernel argument, so no host memory must outlive the call.
void launch_write_seed_and_offset(uint64_t* pair, uint64_t seed, uint64_t offset, cudaStream_t stream);

}  // namespace ember::cuda
