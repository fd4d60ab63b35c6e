// The pointer arrays of a batched product, computed on the device: one thread per matrix
// evaluates GemmBatchLayout::offset, the same function the CPU test checks, for the three
// operands. Computing them here rather than on the host is what lets the cuBLAS call that
// reads them be queued without a host-to-device copy and recorded in a CUDA graph: the layout
// and the bases travel as kernel arguments, which a graph keeps by value.
#include "cuda/runtime/check.h"
#include "cuda/ops/gemm_pointers_kernels.h"
#include "cuda/runtime/launch.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

__global__ void gemm_pointers_kernel(GemmBatchLayout layout, const char* a, const char* b, char* c,
                                     size_t element_size, void** pointers) {
  const int64_t count = layout.count;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    pointers[i] = const_cast<char*>(a + layout.offset(kOperandA, i) * static_cast<int64_t>(element_size));
    pointers[count + i] = const_cast<char*>(b + layout.offset(kOperandB, i) * static_cast<int64_t>(element_size));
    pointers[2 * count + i] = c + layout.offset(kOperandC, i) * static_cast<int64_t>(element_size);
  }
}

}  // namespace

void launch_gemm_pointers(const GemmBatchLayout& layout, const void* a, const void* b, void* c, size_t element_size,
                          void** pointers) {
  if (layout.count == 0) return;
  gemm_pointers_kernel<<<blocks_for(layout.count), kThreadsPerBlock, 0, current_stream()>>>(
      layout, static_cast<const char*>(a), static_cast<const char*>(b), static_cast<char*>(c), element_size, pointers);
  check_launch("matmul: gemm pointers");
}

}  // namespace ember::cuda
