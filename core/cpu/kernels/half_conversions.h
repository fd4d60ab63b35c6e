// Rows of 16-bit values widened to float32 and float32 results rounded back, for each rung: the
// two ends of every CPU kernel that computes on bfloat16 or float16 in float32
// (core/cpu/half_rows.h calls them). They work on the bits with half.h's functions: written
// through the value types' own conversions, the loops do not vectorise. float16's decoding
// branches on subnormals and infinities, so the rungs with F16C convert by its instructions,
// which are exact both ways and round as half.h does (to nearest even, subnormals, overflow to
// infinity, NaNs quieted with the top of their payload).
#pragma once

#include <cstdint>

#include "core/cpu/kernels/rung_namespace.h"
#include "core/half.h"

#if defined(__F16C__)
#include "core/cpu/x86_intrinsics.h"
#endif

namespace ember::cpu::EMBER_CPU_KERNELS {

inline void widen_bf16(const BFloat16* x, int64_t n, float* to) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) to[i] = half_bits::bfloat16_to_float(x[i].bits);
}

inline void widen_f16(const Float16* x, int64_t n, float* to) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(to + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
#endif
  for (; i < n; ++i) to[i] = half_bits::float16_to_float(x[i].bits);
}

inline void round_to_bf16(const float* x, int64_t n, BFloat16* to) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) to[i].bits = half_bits::from_float_to_bfloat16(x[i]);
}

inline void round_to_f16(const float* x, int64_t n, Float16* to) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i rounded = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + i), rounded);
  }
#endif
  for (; i < n; ++i) to[i].bits = half_bits::from_float_to_float16(x[i]);
}

}  // namespace ember::cpu::EMBER_CPU_KERNELS
