// softmax or log_softmax of one contiguous row: the softmax op's row kernel, and the fused
// attention kernel's softmax of each row of scores (in place: out may be x).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/cpu/row_loops.h"
#include "core/cpu/vector_math.h"

namespace ember::cpu {

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

}  // namespace ember::cpu
