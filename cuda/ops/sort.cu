// sort and topk on CUDA by repeated selection: a block owns a row and finds its k outputs one
// after another, each the first element, in sort order, that comes after the previous output.
// Ties are broken by position, so the order is total and the result is that of a stable sort.
//
// This costs k passes over the row (k * length reads). It is meant for what decoding asks of
// it: topk with a small k (beam widths) over a vocabulary, and full sorts of short rows. A
// full sort of a long row is correct but slow; a radix or bitonic sort would be the next step.
#include <cmath>

#include "cuda/runtime/check.h"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/launch.h"
#include "cuda/ops/sort_kernels.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

constexpr int kSortThreads = 256;

template <class T>
__device__ bool is_nan(T value) {
  return value != value;  // false for integers and bools
}

// Whether (a, ia) comes strictly before (b, ib): by value (NaN as the largest), then position.
template <class T>
__device__ bool comes_before(T a, int64_t ia, T b, int64_t ib, bool descending) {
  const bool a_nan = is_nan(a), b_nan = is_nan(b);
  if (a_nan != b_nan) return descending ? a_nan : b_nan;
  if (!a_nan && a != b) return descending ? a > b : a < b;
  return ia < ib;
}

// Values are compared as their compute type: a 16-bit element widens to float exactly, and the
// selected one is stored back unchanged.
template <class T>
__global__ void sort_rows(const T* x, T* values, int64_t* indices, int64_t rows, int64_t length, int64_t k,
                          bool descending) {
  using C = compute_t<T>;
  __shared__ C best_values[kSortThreads];
  __shared__ int64_t best_positions[kSortThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * length;
    C previous = C(0);
    int64_t previous_position = -1;  // none yet: every element qualifies
    for (int64_t out = 0; out < k; ++out) {
      // This thread's first element after `previous`, in sort order.
      C best = C(0);
      int64_t best_position = -1;
      for (int64_t i = threadIdx.x; i < length; i += blockDim.x) {
        const C v = to_compute(in[i]);
        if (previous_position >= 0 && !comes_before(previous, previous_position, v, i, descending)) continue;
        if (best_position < 0 || comes_before(v, i, best, best_position, descending)) {
          best = v;
          best_position = i;
        }
      }
      best_values[threadIdx.x] = best;
      best_positions[threadIdx.x] = best_position;
      __syncthreads();
      for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
          const C other = best_values[threadIdx.x + stride];
          const int64_t other_position = best_positions[threadIdx.x + stride];
          const int64_t mine = best_positions[threadIdx.x];
          if (other_position >= 0 &&
              (mine < 0 || comes_before(other, other_position, best_values[threadIdx.x], mine, descending))) {
            best_values[threadIdx.x] = other;
            best_positions[threadIdx.x] = other_position;
          }
        }
        __syncthreads();
      }
      previous = best_values[0];
      previous_position = best_positions[0];
      if (threadIdx.x == 0) {
        values[row * k + out] = round_to<T>(previous);
        indices[row * k + out] = previous_position;
      }
      __syncthreads();  // best_values is rewritten by the next selection
    }
  }
}

}  // namespace

template <class T>
void launch_sort(const T* x, T* values, int64_t* indices, int64_t rows, int64_t length, int64_t k, bool descending) {
  if (rows == 0 || k == 0) return;
  sort_rows<<<blocks_for(rows * kSortThreads, kSortThreads), kSortThreads, 0, current_stream()>>>(
      x, values, indices, rows, length, k, descending);
  check_launch("sort");
}

template void launch_sort<float>(const float*, float*, int64_t*, int64_t, int64_t, int64_t, bool);
template void launch_sort<double>(const double*, double*, int64_t*, int64_t, int64_t, int64_t, bool);
template void launch_sort<int64_t>(const int64_t*, int64_t*, int64_t*, int64_t, int64_t, int64_t, bool);
template void launch_sort<bool>(const bool*, bool*, int64_t*, int64_t, int64_t, int64_t, bool);
template void launch_sort<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, int64_t*, int64_t, int64_t, int64_t,
                                         bool);
template void launch_sort<__half>(const __half*, __half*, int64_t*, int64_t, int64_t, int64_t, bool);

}  // namespace ember::cuda
