// softmax or log_softmax of contiguous rows and of strided columns: the softmax op's kernels, and
// the fused attention kernel's softmax of each row of scores (in place: out may be x). Compiled
// into each rung, for float32 and float64.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/cpu/kernels/row_loops.h"
#include "core/cpu/kernels/rung_namespace.h"
#include "core/cpu/kernels/vector_math.h"

namespace ember::cpu::EMBER_CPU_KERNELS {

// One contiguous row. `next_x` and `next_out` are the row after it (nullptr for none),
// prefetched during the exp pass: the input for reading, the output for writing (a store to
// a line not in cache would otherwise stall on fetching it). A row of all -inf has max -inf,
// so x - max is NaN and the row becomes NaN, as in PyTorch; with a finite max, -inf entries
// give exactly 0 (and -inf for log).
template <class T>
void softmax_row(T* out, const T* x, const T* next_x, T* next_out, int64_t n, bool log) {
  const T max = row_max(x, n);
  auto prefetch_next = [&](int64_t i) {
    if (next_x == nullptr) return;
    __builtin_prefetch(next_x + i);
    __builtin_prefetch(next_out + i, 1);
  };
  if (log) {
    const T sum =
        sum_over_row<T>(n, prefetch_next, [&](int64_t i) { return exp_nonpositive<T>(x[i] - max); });
    // (x - max) - log(sum), not x - (max + log(sum)): the latter rounds to the spacing of
    // max, which is 1e-3 for float32 logits of 1e4.
    const T log_sum = std::log(sum);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - max) - log_sum;
  } else {
    const T sum = sum_over_row<T>(n, prefetch_next, [&](int64_t i) {
      const T e = exp_nonpositive<T>(x[i] - max);
      out[i] = e;
      return e;
    });
    const T inverse = T(1) / sum;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] *= inverse;
  }
}

// The strided case: a block of `width` neighbouring columns, each a softmax along n with stride
// `inner`, with max and sum scratch of `width` elements. Rows of the block are unit-stride, so
// every pass vectorises across columns.
template <class T>
void softmax_columns(T* out, const T* x, int64_t n, int64_t inner, int64_t width, bool log, T* max, T* sum) {
  for (int64_t i = 0; i < width; ++i) max[i] = -std::numeric_limits<T>::infinity(), sum[i] = 0;
  for (int64_t r = 0; r < n; ++r) {
    const T* row = x + r * inner;
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) max[i] = row[i] > max[i] ? row[i] : max[i];
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* row = x + r * inner;
    T* out_row = out + r * inner;
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) {
      const T e = exp_nonpositive<T>(row[i] - max[i]);
      if (!log) out_row[i] = e;
      sum[i] += e;
    }
  }
  if (log) {
    for (int64_t i = 0; i < width; ++i) sum[i] = std::log(sum[i]);
  } else {
    for (int64_t i = 0; i < width; ++i) sum[i] = T(1) / sum[i];
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* row = x + r * inner;
    T* out_row = out + r * inner;
    if (log) {
#pragma omp simd
      for (int64_t i = 0; i < width; ++i) out_row[i] = (row[i] - max[i]) - sum[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < width; ++i) out_row[i] *= sum[i];
    }
  }
}

// log_softmax's backward: out[i] = g[i] - e^(y[i]) * (dots ? dots[i] : dot). y is a
// log-probability, never positive.
template <class T>
void log_softmax_gradient(const T* g, const T* y, int64_t n, T dot, const T* dots, T* out) {
  if (dots == nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = g[i] - exp_nonpositive<T>(y[i]) * dot;
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = g[i] - exp_nonpositive<T>(y[i]) * dots[i];
  }
}

}  // namespace ember::cpu::EMBER_CPU_KERNELS
