// Selecting elements on the GPU: where(condition, a, b), which masked_fill also runs (with the
// fill value as a 0-d operand), and the triangular masks of tril and triu. Both only move
// elements, so 16-bit ones move as they are.
#include "cuda/common/elementwise.cuh"
#include "cuda/common/half_elements.h"
#include "cuda/ops/select_kernels.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

template <class T>
struct Select {
  __device__ T operator()(bool condition, T a, T b) const { return condition ? a : b; }
};

template <class T>
__global__ void triangle_kernel(T* out, const T* x, int64_t count, int64_t rows, int64_t cols, int64_t diagonal,
                                bool lower) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    const int64_t column = i % cols;
    const int64_t row = (i / cols) % rows;
    const bool keep = lower ? column - row <= diagonal : column - row >= diagonal;
    out[i] = keep ? x[i] : round_to<T>(0);
  }
}

}  // namespace

template <class T>
void launch_where(const StridedLayout<4>& layout, int64_t n, T* out, const bool* condition, const T* a,
                  const T* b) {
  launch_elementwise("where", layout, n, Select<T>{}, out, condition, a, b);
}

template <class T>
void launch_triangle(T* out, const T* x, int64_t count, int64_t rows, int64_t cols, int64_t diagonal, bool lower) {
  if (count == 0) return;
  triangle_kernel<<<blocks_for(count), kThreadsPerBlock, 0, current_stream()>>>(
      out, x, count, rows, cols, diagonal, lower);
  check_launch(lower ? "tril" : "triu");
}

#define EMBER_INSTANTIATE_SELECT(T)                                                                        \
  template void launch_where<T>(const StridedLayout<4>&, int64_t, T*, const bool*, const T*, const T*); \
  template void launch_triangle<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, bool);
EMBER_INSTANTIATE_SELECT(float)
EMBER_INSTANTIATE_SELECT(double)
EMBER_INSTANTIATE_SELECT(int64_t)
EMBER_INSTANTIATE_SELECT(bool)
EMBER_INSTANTIATE_SELECT(__nv_bfloat16)
EMBER_INSTANTIATE_SELECT(__half)
#undef EMBER_INSTANTIATE_SELECT

}  // namespace ember::cuda
