// Rows of 16-bit values widened to float32 and float32 results rounded back, the two ends of
// every CPU kernel that computes on bfloat16 or float16 in float32 (the elementwise loop, the
// row kernels, the products).
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/half.h"

#if defined(__F16C__)
#include "core/cpu/x86_intrinsics.h"
#endif

namespace ember::cpu {

// to[i] = x[i] as float32 (exact from the 16-bit formats): a 16-bit row widened into scratch
// where a float32 row kernel computes on it. The conversions work on the bits with half.h's
// functions: written through the value types' own conversions, the loops do not vectorise.
// float16's decoding branches on subnormals and infinities, so it uses the F16C instruction
// (exact, as that decoding is) where the CPU has one.
template <class T>
void widen_row(const T* x, int64_t n, float* to) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, Float16>) {
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(to + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
    }
#endif
    for (; i < n; ++i) to[i] = half_bits::float16_to_float(x[i].bits);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) to[j] = half_bits::bfloat16_to_float(x[j].bits);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) to[j] = static_cast<float>(x[j]);
  }
}

// to[i] = T(x[i]): a float32 result rounded once (to nearest, ties to even), where it is stored.
// F16C's rounding to float16 is IEEE's, as half.h's is (subnormals, overflow to infinity, NaNs
// quieted with the top of their payload), and costs one instruction per 8 values.
template <class T>
void round_row(const float* x, int64_t n, T* to) {
  if constexpr (std::is_same_v<T, Float16>) {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
      const __m128i rounded = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(to + i), rounded);
    }
#endif
    for (; i < n; ++i) to[i].bits = half_bits::from_float_to_float16(x[i]);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) to[i].bits = half_bits::from_float_to_bfloat16(x[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) to[i] = static_cast<T>(x[i]);
  }
}

}  // namespace ember::cpu
