// layer_norm on CUDA. The forward and grad_x give each row to one block (two block sums for the
// mean and the variance of x - mean, as the CPU computes them; two more for grad_x). grad_weight
// and grad_bias are sums over rows, computed by a second kernel in which a block owns 32
// columns and its 16 thread rows walk the rows: reads stay coalesced, each column's sum is
// formed in a fixed order (no atomics, so the result is reproducible), and float32 sums are
// accumulated in double, as on the CPU.
#include <cmath>
#include <type_traits>

#include "cuda/block_reduce.cuh"
#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/layer_norm_kernels.h"
#include "cuda/stream.h"

namespace ember::cuda {
namespace {

template <class T>
__global__ void layer_norm_rows(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, int64_t rows,
                                int64_t n, T eps) {
  const T inverse_n = T(1) / static_cast<T>(n);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * n;
    T* out = y + row * n;
    T sum = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += in[i];
    const T mu = block_sum(sum) * inverse_n;
    T squares = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) squares += (in[i] - mu) * (in[i] - mu);
    const T sigma_inverse = T(1) / sqrt(block_sum(squares) * inverse_n + eps);
    if (threadIdx.x == 0) {
      mean[row] = mu;
      rstd[row] = sigma_inverse;
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      T value = (in[i] - mu) * sigma_inverse;
      if (weight != nullptr) value *= weight[i];
      if (bias != nullptr) value += bias[i];
      out[i] = value;
    }
  }
}

// grad_x = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = grad_y * weight.
template <class T>
__global__ void layer_norm_grad_x(const T* grad_y, const T* x, const T* mean, const T* rstd, const T* weight,
                                  T* grad_x, int64_t rows, int64_t n) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * n;
    const T* g = grad_y + row * n;
    const T m = mean[row], s = rstd[row];
    T sum_g = 0, sum_g_xhat = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const T scaled = weight != nullptr ? g[i] * weight[i] : g[i];
      sum_g += scaled;
      sum_g_xhat += scaled * ((in[i] - m) * s);
    }
    const T mean_g = block_sum(sum_g) / static_cast<T>(n);
    const T mean_g_xhat = block_sum(sum_g_xhat) / static_cast<T>(n);
    T* gx = grad_x + row * n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const T scaled = weight != nullptr ? g[i] * weight[i] : g[i];
      gx[i] = s * (scaled - mean_g - (in[i] - m) * s * mean_g_xhat);
    }
  }
}

constexpr int kColumnsPerBlock = 32, kRowLanes = 16;

// grad_weight[i] = sum over rows of grad_y * xhat, grad_bias[i] = sum over rows of grad_y.
// Launched with blockDim (kColumnsPerBlock, kRowLanes).
template <class T>
__global__ void layer_norm_grad_parameters(const T* grad_y, const T* x, const T* mean, const T* rstd,
                                           T* grad_weight, T* grad_bias, int64_t rows, int64_t n) {
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
  __shared__ Acc weight_partials[kRowLanes][kColumnsPerBlock];
  __shared__ Acc bias_partials[kRowLanes][kColumnsPerBlock];
  for (int64_t first = blockIdx.x * int64_t(kColumnsPerBlock); first < n;
       first += int64_t(gridDim.x) * kColumnsPerBlock) {
    const int64_t column = first + threadIdx.x;
    Acc weight_sum = 0, bias_sum = 0;
    if (column < n) {
      for (int64_t row = threadIdx.y; row < rows; row += kRowLanes) {
        const T g = grad_y[row * n + column];
        weight_sum += static_cast<Acc>(g * ((x[row * n + column] - mean[row]) * rstd[row]));
        bias_sum += static_cast<Acc>(g);
      }
    }
    weight_partials[threadIdx.y][threadIdx.x] = weight_sum;
    bias_partials[threadIdx.y][threadIdx.x] = bias_sum;
    __syncthreads();
    if (threadIdx.y == 0 && column < n) {
      for (int lane = 1; lane < kRowLanes; ++lane) {
        weight_sum += weight_partials[lane][threadIdx.x];
        bias_sum += bias_partials[lane][threadIdx.x];
      }
      if (grad_weight != nullptr) grad_weight[column] = static_cast<T>(weight_sum);
      if (grad_bias != nullptr) grad_bias[column] = static_cast<T>(bias_sum);
    }
    __syncthreads();  // the partials are rewritten by the next group of columns
  }
}

}  // namespace

template <class T>
void launch_layer_norm_forward(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, int64_t rows,
                               int64_t n, double eps) {
  if (rows == 0 || n == 0) return;  // nothing to write; core guards too, but the kernels table is public
  layer_norm_rows<<<blocks_for(rows * kRowThreads, kRowThreads), kRowThreads, 0, current_stream()>>>(
      x, weight, bias, y, mean, rstd, rows, n, static_cast<T>(eps));
  check_launch("layer_norm");
}

template <class T>
void launch_layer_norm_backward(const T* grad_y, const T* x, const T* mean, const T* rstd, const T* weight,
                                T* grad_x, T* grad_weight, T* grad_bias, int64_t rows, int64_t n) {
  // No elements: nothing to write here (core zeroes grad_weight and grad_bias itself).
  if (rows == 0 || n == 0) return;
  if (grad_x != nullptr) {
    layer_norm_grad_x<<<blocks_for(rows * kRowThreads, kRowThreads), kRowThreads, 0, current_stream()>>>(
        grad_y, x, mean, rstd, weight, grad_x, rows, n);
    check_launch("layer_norm backward");
  }
  if (grad_weight != nullptr || grad_bias != nullptr) {
    const dim3 threads(kColumnsPerBlock, kRowLanes);
    layer_norm_grad_parameters<<<blocks_for(n, kColumnsPerBlock), threads, 0, current_stream()>>>(
        grad_y, x, mean, rstd, grad_weight, grad_bias, rows, n);
    check_launch("layer_norm backward");
  }
}

#define EMBER_INSTANTIATE(T)                                                                                   \
  template void launch_layer_norm_forward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t, double); \
  template void launch_layer_norm_backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*,      \
                                              int64_t, int64_t);
EMBER_INSTANTIATE(float)
EMBER_INSTANTIATE(double)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
