// layer_norm on CUDA. The forward and grad_x give each row to one block (two block sums for the
// mean and the variance of x - mean, as the CPU computes them; two more for grad_x). grad_weight
// and grad_bias are sums over rows, split as cuda/column_sum_plan.h plans: a block owns 32
// columns and one slice of the rows, which its 16 thread rows walk (reads stay coalesced); a
// second kernel adds each column's partials in slice order. Every sum is formed in a fixed order
// (no atomics, so the result is reproducible), and float32 sums are accumulated in double, as on
// the CPU. bfloat16 and float16 rows are read as float: the
// statistics (mean and rstd, kept in float32) and every output are computed in float32, and
// each output is rounded once where it is stored.
#include <cmath>
#include <type_traits>

#include "cuda/block_reduce.cuh"
#include "cuda/check.h"
#include "cuda/column_sum_plan.h"
#include "cuda/half_elements.h"
#include "cuda/launch.h"
#include "cuda/layer_norm_kernels.h"
#include "cuda/stream.h"

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

constexpr int kRowLanes = 16;  // thread rows of a parameter-gradient block, each walking every 16th row

// Partial sums over one slice of the rows, for 32 columns: weight_partials[split * n + column] =
// sum of grad_y * xhat, bias_partials[...] = sum of grad_y, over the slice's rows. Launched with
// blockDim (kColumnsPerGroup, kRowLanes) and gridDim.y = plan.splits; gridDim.x strides over the
// column groups.
template <class T, class C = compute_t<T>>
__global__ void layer_norm_parameter_partials(const T* grad_y, const T* x, const C* mean, const C* rstd,
                                              ColumnSumPlan plan, double* weight_partials, double* bias_partials) {
  // double for float32 and the 16-bit formats, as on the CPU; double stays double.
  __shared__ double weight_lanes[kRowLanes][kColumnsPerGroup];
  __shared__ double bias_lanes[kRowLanes][kColumnsPerGroup];
  const int64_t n = plan.columns, split = blockIdx.y;
  const int64_t begin = plan.split_begin(split), end = plan.split_end(split);
  for (int64_t first = blockIdx.x * kColumnsPerGroup; first < n; first += int64_t(gridDim.x) * kColumnsPerGroup) {
    const int64_t column = first + threadIdx.x;
    double weight_sum = 0, bias_sum = 0;
    if (column < n) {
      for (int64_t row = begin + threadIdx.y; row < end; row += kRowLanes) {
        const C g = to_compute(grad_y[row * n + column]);
        weight_sum += static_cast<double>(g * ((to_compute(x[row * n + column]) - mean[row]) * rstd[row]));
        bias_sum += static_cast<double>(g);
      }
    }
    weight_lanes[threadIdx.y][threadIdx.x] = weight_sum;
    bias_lanes[threadIdx.y][threadIdx.x] = bias_sum;
    __syncthreads();
    if (threadIdx.y == 0 && column < n) {
      for (int lane = 1; lane < kRowLanes; ++lane) {
        weight_sum += weight_lanes[lane][threadIdx.x];
        bias_sum += bias_lanes[lane][threadIdx.x];
      }
      weight_partials[split * n + column] = weight_sum;
      bias_partials[split * n + column] = bias_sum;
    }
    __syncthreads();  // the lanes' shared sums are rewritten by the next group of columns
  }
}

// grad_weight[column] and grad_bias[column]: the column's partials added in slice order, then
// stored through the compute type, as the CPU stores these sums.
template <class T, class C = compute_t<T>>
__global__ void layer_norm_parameter_totals(const double* weight_partials, const double* bias_partials,
                                            ColumnSumPlan plan, T* grad_weight, T* grad_bias) {
  const int64_t n = plan.columns;
  for (int64_t column = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; column < n;
       column += int64_t(gridDim.x) * blockDim.x) {
    double weight_sum = 0, bias_sum = 0;
    for (int64_t split = 0; split < plan.splits; ++split) {
      weight_sum += weight_partials[split * n + column];
      bias_sum += bias_partials[split * n + column];
    }
    if (grad_weight != nullptr) grad_weight[column] = round_to<T>(static_cast<C>(weight_sum));
    if (grad_bias != nullptr) grad_bias[column] = round_to<T>(static_cast<C>(bias_sum));
  }
}

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
    const ColumnSumPlan plan = plan_column_sums(rows, n);
    double* weight_partials = scratch;
    double* bias_partials = scratch + plan.partials_per_sum();
    const dim3 threads(kColumnsPerGroup, kRowLanes);
    const dim3 blocks(blocks_for(n, kColumnsPerGroup), static_cast<unsigned int>(plan.splits));
    layer_norm_parameter_partials<<<blocks, threads, 0, current_stream()>>>(grad_y, x, mean, rstd, plan,
                                                                            weight_partials, bias_partials);
    check_launch("layer_norm backward");
    layer_norm_parameter_totals<<<blocks_for(n), kThreadsPerBlock, 0, current_stream()>>>(
        weight_partials, bias_partials, plan, grad_weight, grad_bias);
    check_launch("layer_norm backward");
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
