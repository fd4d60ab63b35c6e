// layer_norm on CUDA. The forward and grad_x give each row to one block (two block sums for the
// mean and the variance of x - mean, as the CPU computes them; two more for grad_x). grad_weight
// and grad_bias are sums over rows, both taken by one pass of cuda/common/column_sums.cuh: coalesced,
// split over the GPU, in a fixed order (no atomics, so the result is reproducible), and
// accumulated in double, as on the CPU. bfloat16 and float16 rows are read as float: the
// statistics (mean and rstd, kept in float32) and every output are computed in float32, and
// each output is rounded once where it is stored.
#include <cmath>

#include "cuda/common/block_reduce.cuh"
#include "cuda/runtime/check.h"
#include "cuda/common/column_sums.cuh"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/launch.h"
#include "cuda/ops/layer_norm_kernels.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

template <class T, class C = compute_t<T>>
__global__ void layer_norm_rows(const T* x, const T* weight, const T* bias, T* y, C* mean, C* rstd, int64_t rows,
                                int64_t n, C eps) {
  const C inverse_n = C(1) / static_cast<C>(n);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * n;
    T* out = y + row * n;
    C sum = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += to_compute(in[i]);
    const C mu = block_sum(sum) * inverse_n;
    C squares = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const C deviation = to_compute(in[i]) - mu;
      squares += deviation * deviation;
    }
    const C sigma_inverse = C(1) / sqrt(block_sum(squares) * inverse_n + eps);
    if (threadIdx.x == 0) {
      mean[row] = mu;
      rstd[row] = sigma_inverse;
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      C value = (to_compute(in[i]) - mu) * sigma_inverse;
      if (weight != nullptr) value *= to_compute(weight[i]);
      if (bias != nullptr) value += to_compute(bias[i]);
      out[i] = round_to<T>(value);
    }
  }
}

// grad_x = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = grad_y * weight.
template <class T, class C = compute_t<T>>
__global__ void layer_norm_grad_x(const T* grad_y, const T* x, const C* mean, const C* rstd, const T* weight,
                                  T* grad_x, int64_t rows, int64_t n) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * n;
    const T* g = grad_y + row * n;
    const C m = mean[row], s = rstd[row];
    // g * weight, in the compute type.
    auto scaled_at = [&](int64_t i) {
      return weight != nullptr ? to_compute(g[i]) * to_compute(weight[i]) : to_compute(g[i]);
    };
    C sum_g = 0, sum_g_xhat = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const C scaled = scaled_at(i);
      sum_g += scaled;
      sum_g_xhat += scaled * ((to_compute(in[i]) - m) * s);
    }
    const C mean_g = block_sum(sum_g) / static_cast<C>(n);
    const C mean_g_xhat = block_sum(sum_g_xhat) / static_cast<C>(n);
    T* gx = grad_x + row * n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      gx[i] = round_to<T>(s * (scaled_at(i) - mean_g - (to_compute(in[i]) - m) * s * mean_g_xhat));
    }
  }
}

// One row's terms of grad_weight and grad_bias at a column: grad_y * xhat and grad_y, each
// computed in the compute type as on the CPU, then summed in double (cuda/common/column_sums.cuh).
template <class T, class C = compute_t<T>>
struct ParameterGradientTerms {
  const T* grad_y;
  const T* x;
  const C* mean;
  const C* rstd;
  int64_t n;
  __device__ void operator()(int64_t row, int64_t column, double (&terms)[2]) const {
    const C g = to_compute(grad_y[row * n + column]);
    terms[0] = static_cast<double>(g * ((to_compute(x[row * n + column]) - mean[row]) * rstd[row]));
    terms[1] = static_cast<double>(g);
  }
};

// Stores the column totals through the compute type, as the CPU stores these sums.
template <class T, class C = compute_t<T>>
struct StoreParameterGradients {
  T* grad_weight;
  T* grad_bias;
  __device__ void operator()(int64_t column, const double (&totals)[2]) const {
    if (grad_weight != nullptr) grad_weight[column] = round_to<T>(static_cast<C>(totals[0]));
    if (grad_bias != nullptr) grad_bias[column] = round_to<T>(static_cast<C>(totals[1]));
  }
};

}  // namespace

template <class T>
void launch_layer_norm_forward(const T* x, const T* weight, const T* bias, T* y, compute_t<T>* mean,
                               compute_t<T>* rstd, int64_t rows, int64_t n, double eps) {
  if (rows == 0 || n == 0) return;  // nothing to write; core guards too, but the kernels table is public
  layer_norm_rows<<<blocks_for(rows * kRowThreads, kRowThreads), kRowThreads, 0, current_stream()>>>(
      x, weight, bias, y, mean, rstd, rows, n, static_cast<compute_t<T>>(eps));
  check_launch("layer_norm");
}

template <class T>
void launch_layer_norm_backward(const T* grad_y, const T* x, const compute_t<T>* mean, const compute_t<T>* rstd,
                                const T* weight, T* grad_x, T* grad_weight, T* grad_bias, double* scratch,
                                int64_t rows, int64_t n) {
  // No elements: nothing to write here (core zeroes grad_weight and grad_bias itself).
  if (rows == 0 || n == 0) return;
  if (grad_x != nullptr) {
    layer_norm_grad_x<<<blocks_for(rows * kRowThreads, kRowThreads), kRowThreads, 0, current_stream()>>>(
        grad_y, x, mean, rstd, weight, grad_x, rows, n);
    check_launch("layer_norm backward");
  }
  if (grad_weight != nullptr || grad_bias != nullptr) {
    launch_column_sums<2>("layer_norm backward", plan_column_sums(rows, n),
                          ParameterGradientTerms<T>{grad_y, x, mean, rstd, n},
                          StoreParameterGradients<T>{grad_weight, grad_bias}, scratch);
  }
}

#define EMBER_INSTANTIATE(T)                                                                                  \
  template void launch_layer_norm_forward<T>(const T*, const T*, const T*, T*, compute_t<T>*, compute_t<T>*,     \
                                             int64_t, int64_t, double);                                         \
  template void launch_layer_norm_backward<T>(const T*, const T*, const compute_t<T>*, const compute_t<T>*,      \
                                              const T*, T*, T*, T*, double*, int64_t, int64_t);
EMBER_FOR_EACH_FLOATING_ELEMENT(EMBER_INSTANTIATE)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
