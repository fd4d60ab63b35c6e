// softmax and log_softmax on CUDA, forward and backward. A softmax along the last dim (inner
// == 1, the attention and classifier case) gives each row to one block, whose threads read the
// row coalesced and combine their max and sums with block reductions. Along any other dim the
// elements of a softmax lie `inner` apart, so one thread takes a whole column: neighbouring
// threads then read neighbouring columns, which is coalesced too. bfloat16 and float16 are read
// as float (cuda/common/half_elements.h): the max, the sums and each output are computed in float32,
// and the output is rounded once where it is stored.
#include <cmath>

#include "cuda/common/block_reduce.cuh"
#include "cuda/runtime/check.h"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/launch.h"
#include "cuda/ops/softmax_kernels.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

// A row of all -inf has max -inf, so x - max is NaN and the row becomes NaN, as on the CPU.
template <class T>
__global__ void softmax_rows(const T* x, T* y, int64_t rows, int64_t n, bool log) {
  using C = compute_t<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * n;
    T* out = y + row * n;
    C max = -std::numeric_limits<C>::infinity();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) max = MaxOp<C>{}(max, to_compute(in[i]));
    max = block_max(max);
    C sum = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += exp(to_compute(in[i]) - max);
    sum = block_sum(sum);
    // (x - max) - log(sum), not x - (max + log(sum)), which rounds to the spacing of max.
    const C log_sum = ::log(sum), inverse = C(1) / sum;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const C v = to_compute(in[i]);
      out[i] = round_to<T>(log ? (v - max) - log_sum : exp(v - max) * inverse);
    }
  }
}

template <class T>
__global__ void softmax_columns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  using C = compute_t<T>;
  const int64_t columns = outer * inner;
  for (int64_t column = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; column < columns;
       column += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (column / inner) * n * inner + column % inner;
    C max = -std::numeric_limits<C>::infinity();
    for (int64_t r = 0; r < n; ++r) max = MaxOp<C>{}(max, to_compute(x[base + r * inner]));
    C sum = 0;
    for (int64_t r = 0; r < n; ++r) sum += exp(to_compute(x[base + r * inner]) - max);
    const C log_sum = ::log(sum), inverse = C(1) / sum;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t at = base + r * inner;
      const C v = to_compute(x[at]);
      y[at] = round_to<T>(log ? (v - max) - log_sum : exp(v - max) * inverse);
    }
  }
}

template <class T>
__global__ void softmax_backward_rows(const T* grad_y, const T* y, T* grad_x, int64_t rows, int64_t n, bool log) {
  using C = compute_t<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* g = grad_y + row * n;
    const T* out = y + row * n;
    T* gx = grad_x + row * n;
    C dot = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      dot += log ? to_compute(g[i]) : to_compute(g[i]) * to_compute(out[i]);
    }
    dot = block_sum(dot);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      gx[i] = round_to<T>(log ? to_compute(g[i]) - exp(to_compute(out[i])) * dot
                              : to_compute(out[i]) * (to_compute(g[i]) - dot));
    }
  }
}

template <class T>
__global__ void softmax_backward_columns(const T* grad_y, const T* y, T* grad_x, int64_t outer, int64_t n,
                                         int64_t inner, bool log) {
  using C = compute_t<T>;
  const int64_t columns = outer * inner;
  for (int64_t column = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; column < columns;
       column += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (column / inner) * n * inner + column % inner;
    C dot = 0;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t at = base + r * inner;
      dot += log ? to_compute(grad_y[at]) : to_compute(grad_y[at]) * to_compute(y[at]);
    }
    for (int64_t r = 0; r < n; ++r) {
      const int64_t at = base + r * inner;
      grad_x[at] = round_to<T>(log ? to_compute(grad_y[at]) - exp(to_compute(y[at])) * dot
                                   : to_compute(y[at]) * (to_compute(grad_y[at]) - dot));
    }
  }
}

}  // namespace

template <class T>
void launch_softmax_forward(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  if (outer * n * inner == 0) return;  // nothing to write; core guards too, but the kernels table is public
  if (inner == 1) {
    softmax_rows<<<blocks_for(outer * kRowThreads, kRowThreads), kRowThreads, 0, current_stream()>>>(
        x, y, outer, n, log);
  } else {
    softmax_columns<<<blocks_for(outer * inner), kThreadsPerBlock, 0, current_stream()>>>(x, y, outer, n, inner, log);
  }
  check_launch(log ? "log_softmax" : "softmax");
}

template <class T>
void launch_softmax_backward(const T* grad_y, const T* y, T* grad_x, int64_t outer, int64_t n, int64_t inner,
                             bool log) {
  if (outer * n * inner == 0) return;
  if (inner == 1) {
    softmax_backward_rows<<<blocks_for(outer * kRowThreads, kRowThreads), kRowThreads, 0, current_stream()>>>(
        grad_y, y, grad_x, outer, n, log);
  } else {
    softmax_backward_columns<<<blocks_for(outer * inner), kThreadsPerBlock, 0, current_stream()>>>(
        grad_y, y, grad_x, outer, n, inner, log);
  }
  check_launch(log ? "log_softmax backward" : "softmax backward");
}

#define EMBER_INSTANTIATE_SOFTMAX(T)                                                            \
  template void launch_softmax_forward<T>(const T*, T*, int64_t, int64_t, int64_t, bool); \
  template void launch_softmax_backward<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, bool);
EMBER_INSTANTIATE_SOFTMAX(float)
EMBER_INSTANTIATE_SOFTMAX(double)
EMBER_INSTANTIATE_SOFTMAX(__nv_bfloat16)
EMBER_INSTANTIATE_SOFTMAX(__half)
#undef EMBER_INSTANTIATE_SOFTMAX

}  // namespace ember::cuda
