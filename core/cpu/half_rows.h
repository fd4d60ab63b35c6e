// Rows of 16-bit values widened to float32 and float32 results rounded back, the two ends of
// every CPU kernel that computes on bfloat16 or float16 in float32 (the elementwise loop, the
// row kernels, the products). The 16-bit conversions run on the rung's kernels
// (core/cpu/kernels/half_conversions.h): F16C converts float16 where the CPU has it.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/cpu/kernel_table.h"
#include "core/dtype.h"
#include "core/half.h"

namespace ember::cpu {

// to[i] = x[i] as float32 (exact from the 16-bit formats): a 16-bit row widened into scratch
// where a float32 row kernel computes on it.
template <class T>
void widen_row(const T* x, int64_t n, float* to) {
  if constexpr (std::is_same_v<T, Float16>) {
    kernels().widen_f16(x, n, to);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    kernels().widen_bf16(x, n, to);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) to[j] = static_cast<float>(x[j]);
  }
}

// to[i] = T(x[i]): a float32 result rounded once (to nearest, ties to even), where it is stored.
template <class T>
void round_row(const float* x, int64_t n, T* to) {
  if constexpr (std::is_same_v<T, Float16>) {
    kernels().round_to_f16(x, n, to);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    kernels().round_to_bf16(x, n, to);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) to[i] = static_cast<T>(x[i]);
  }
}

// A row of T as compute_type<T> values for a row kernel to read: the row itself for float and
// double, a 16-bit row widened into `scratch` (which holds at least n elements) otherwise.
template <class T>
const compute_type<T>* row_in_compute_type(const T* row, int64_t n, std::vector<compute_type<T>>& scratch) {
  if constexpr (std::is_same_v<T, compute_type<T>>) {
    return row;
  } else {
    widen_row(row, n, scratch.data());
    return scratch.data();
  }
}

}  // namespace ember::cpu
