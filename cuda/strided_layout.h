// How an elementwise kernel finds element i of each operand: the operands' shapes merged as far
// as their strides allow (a contiguous tensor becomes one dim), with each operand's element
// strides along the merged dims (0 along broadcast dims). Built on the host from Tensors by
// cuda/tensor_layout.h; read on the device by element_offsets() below.
//
// fmt-free: included by .cu files.
#pragma once

#include <cstdint>

namespace ember::cuda {

// More merged dims than this is an error (raised on the host): no op of ember comes close.
inline constexpr int kMaxLoopDims = 10;

// N operands; operand 0 is the output. Passed to kernels by value.
template <int N>
struct StridedLayout {
  int rank = 1;
  int64_t sizes[kMaxLoopDims] = {};
  int64_t strides[N][kMaxLoopDims] = {};
};

#if defined(__CUDACC__)
// The element offsets of flat (row-major) index `index` in every operand.
template <int N>
__device__ inline void element_offsets(const StridedLayout<N>& layout, int64_t index, int64_t (&offset)[N]) {
  if (layout.rank == 1) {  // the common, contiguous or simply strided case: no division
    for (int k = 0; k < N; ++k) offset[k] = index * layout.strides[k][0];
    return;
  }
  for (int k = 0; k < N; ++k) offset[k] = 0;
  for (int d = layout.rank - 1; d >= 0; --d) {
    const int64_t size = layout.sizes[d];
    const int64_t position = index % size;
    index /= size;
    for (int k = 0; k < N; ++k) offset[k] += position * layout.strides[k][d];
  }
}
#endif

}  // namespace ember::cuda
