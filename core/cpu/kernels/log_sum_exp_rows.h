// The row kernels of cross_entropy and logsumexp: log sum exp of a row with its max, the softmax
// gradient of a row from those, and sums of exponentials shifted by a row's or each column's
// max. Compiled into each rung, for float32 and float64; float32's sums of exponentials add up
// in double (the logsumexp kernel says why).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/cpu/kernel_table.h"
#include "core/cpu/kernels/row_loops.h"
#include "core/cpu/kernels/rung_namespace.h"
#include "core/cpu/kernels/vector_math.h"

namespace ember::cpu::EMBER_CPU_KERNELS {

// {max, log sum_i e^(x[i] - max), sum_i x[i] (only when with_sum)} of a row. The next row,
// `next_row` (nullptr for none) of elements `next_element_bytes` wide, is prefetched during the
// exp pass, which overlaps its memory traffic with this row's arithmetic.
template <class T>
LogSumExp<T> log_sum_exp_row(const T* x, int64_t n, bool with_sum, const void* next_row, int64_t next_element_bytes) {
  LogSumExp<T> result{};
  if (with_sum) {
    const auto [max, sum] = row_max_and_sum(x, n);
    result.max = max;
    result.sum = sum;
  } else {
    result.max = row_max(x, n);
  }
  const char* next = static_cast<const char*>(next_row);
  const T max = result.max;
  const T exp_sum = sum_over_row<T>(
      n, [&](int64_t i) { if (next != nullptr) __builtin_prefetch(next + i * next_element_bytes); },
      [&](int64_t i) { return exp_nonpositive<T>(x[i] - max); });
  result.log_sum = std::log(exp_sum);
  return result;
}

// out[i] = (e^((x[i] - max) - log_sum) - uniform) * scale: the softmax of a row from its
// log_sum_exp_row, less a uniform share, scaled (cross_entropy's gradient before its target's
// entry).
template <class T>
void softmax_gradient_row(const T* x, int64_t n, T max, T log_sum, T uniform, T scale, T* out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = (exp_nonpositive<T>((x[i] - max) - log_sum) - uniform) * scale;
}

// The sum of e^(x[i] - shift) over i < n, added up in double.
template <class T>
double sum_exp_shifted(const T* x, int64_t n, T shift) {
  double total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t i = 0; i < n; ++i) total += static_cast<double>(exp_of<T>(x[i] - shift));
  return total;
}

// total[k] += e^(x[k] - shift[k]) for k < width: one row of a block of columns.
template <class T>
void accumulate_exp_shifted(const T* x, const T* shift, int64_t width, double* total) {
#pragma omp simd
  for (int64_t k = 0; k < width; ++k) total[k] += static_cast<double>(exp_of<T>(x[k] - shift[k]));
}

}  // namespace ember::cpu::EMBER_CPU_KERNELS
