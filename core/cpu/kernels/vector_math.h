// Branch-free float32 exp, erf, gelu, tanh and sigmoid that the compiler vectorises inside
// `#pragma omp simd` loops (libm's scalar calls would stop it), at the width of the rung they are
// compiled for (core/cpu/kernels/rung_namespace.h). Used by the float32 row kernels of softmax,
// log_softmax, cross_entropy and logsumexp, and by the unary ops' vector functions
// (vector_functions.h); float64 keeps std:: functions.
//
// Accuracy (checked on every rung by tests/test_vector_math.cpp): exp within about one float epsilon over the
// normal range, 0 below it (x < -87) and at -inf, inf above 88.72, NaN through; erf within
// 1e-6 absolute everywhere and with good relative accuracy near 0; tanh and sigmoid within a
// few float epsilons.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/cpu/kernels/rung_namespace.h"

namespace ember::cpu::EMBER_CPU_KERNELS {

// Forced inline: a call left in a loop body stops the vectoriser, and GCC's heuristics give
// up on inlining these into the large elementwise-loop templates.
#define EMBER_VECTOR_MATH_INLINE inline __attribute__((always_inline))

// `condition ? if_true : if_false` by a mask over the bits. Written as a conditional, GCC keeps
// a choice between two computed expressions as a branch when their code is long (an exp, a
// rational function), and a branch in a loop body stops the vectoriser: the loop then runs one
// element at a time. Both values are computed either way; this makes the choice a blend.
EMBER_VECTOR_MATH_INLINE float select_f32(bool condition, float if_true, float if_false) {
  const int32_t mask = -static_cast<int32_t>(condition);  // all ones, or 0
  return std::bit_cast<float>((std::bit_cast<int32_t>(if_true) & mask) | (std::bit_cast<int32_t>(if_false) & ~mask));
}

namespace detail {

// e^x for x in [-87, 88.72] (elsewhere garbage): x = n ln2 + r with |r| <= ln2/2; e^r by a
// degree-6 polynomial interpolating it at the Chebyshev nodes of that interval (relative
// error 2.5e-9, against 5e-9 for the degree-7 Taylor polynomial), and 2^n built in the
// exponent bits. The polynomial computes 2 e^r and the exponent 2^(n-1), so that n = 128
// (results up to FLT_MAX) still has a valid exponent. NaN passes through.
EMBER_VECTOR_MATH_INLINE float exp_in_range_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693359375f;  // few mantissa bits: n * kLn2High is exact
  constexpr float kLn2Low = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = x * kLog2e + kRoundMagic;  // its low mantissa bits hold n
  const float n = shifted - kRoundMagic;
  const float r = (x - n * kLn2High) - n * kLn2Low;
  float p = 2.788221696e-03f;
  p = p * r + 1.675025187e-02f;
  p = p * r + 8.333270252e-02f;
  p = p * r + 3.333283067e-01f;
  p = p * r + 1.0f;
  p = p * r + 2.0f;
  p = p * r + 2.0f;
  const int32_t biased_n_minus_1 = std::bit_cast<int32_t>(shifted) - (std::bit_cast<int32_t>(kRoundMagic) - 126);
  const int32_t exponent_bits = biased_n_minus_1 << 23;
  return p * std::bit_cast<float>(exponent_bits);  // 2 e^r * 2^(n-1)
}

}  // namespace detail

// e^x for x <= 0 or NaN: what softmax and cross_entropy exponentiate (logits minus their
// max, log-probabilities), and erf. Results below 2e-38 (x < -87, the bottom of the normal
// range) are 0, -inf included; NaN passes through (the comparison is false). The result's
// bits are masked rather than a constant 0 selected: given a constant, GCC masks every step
// of the arithmetic instead, which costs a third more instructions.
EMBER_VECTOR_MATH_INLINE float exp_nonpositive_f32(float x) {
  const int32_t keep = -static_cast<int32_t>(!(x < -87.0f));  // all ones, or 0 below the range
  return std::bit_cast<float>(std::bit_cast<int32_t>(detail::exp_in_range_f32(x)) & keep);
}

// e^x: as exp_nonpositive_f32, and inf above ln(FLT_MAX).
EMBER_VECTOR_MATH_INLINE float exp_f32(float x) {
  return select_f32(x > 88.72283935546875f, std::numeric_limits<float>::infinity(), exp_nonpositive_f32(x));
}

// erf(a) for a >= 0 by Abramowitz & Stegun 7.1.26: 1 - t (a1 + ... + a5 t^4) e^{-a^2} with
// t = 1 / (1 + p a). Its absolute error is below 1.5e-7 everywhere, but near 0 that is a
// large relative error. NaN passes through; a = inf gives 1.
EMBER_VECTOR_MATH_INLINE float erf_rational_f32(float a) {
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  return 1.0f - poly * t * exp_nonpositive_f32(-a * a);
}

// erf: near 0 (|x| < 0.5) its Maclaurin series, which keeps the relative accuracy there;
// elsewhere erf_rational_f32. Both are computed and one is selected by a blend. (fabs and copysign compile to one bitwise instruction each.)
EMBER_VECTOR_MATH_INLINE float erf_f32(float x) {
  const float a = std::fabs(x);
  const float a2 = a * a;
  // 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320)
  float series = -1.0f / 1320.0f;
  series = series * a2 + 1.0f / 216.0f;
  series = series * a2 - 1.0f / 42.0f;
  series = series * a2 + 1.0f / 10.0f;
  series = series * a2 - 1.0f / 3.0f;
  series = series * a2 + 1.0f;
  series = series * a * 1.12837916709551257f;
  return std::copysign(select_f32(a < 0.5f, series, erf_rational_f32(a)), x);
}

// GELU, x Phi(x) = x/2 (1 + erf(x / sqrt 2)). erf is added to 1 here, so only its absolute
// error matters and erf_rational_f32 serves near 0 too, without erf_f32's series.
EMBER_VECTOR_MATH_INLINE float gelu_f32(float x) {
  const float erf_value = std::copysign(erf_rational_f32(std::fabs(x) * 0.70710678118654752f), x);
  const float half = 0.5f * x;
  return half + half * erf_value;
}

// GELU's derivative, Phi(x) + x phi(x) with phi the standard normal density: the fused
// backward's body. Phi as in gelu_f32; -x^2/2 is never positive, so the cheaper exp serves.
EMBER_VECTOR_MATH_INLINE float gelu_derivative_f32(float x) {
  const float erf_value = std::copysign(erf_rational_f32(std::fabs(x) * 0.70710678118654752f), x);
  const float density = 0.39894228040143268f * exp_nonpositive_f32(-0.5f * x * x);
  return 0.5f + 0.5f * erf_value + x * density;
}

// tanh: near 0 (|x| < 0.4) its odd Maclaurin series to x^11 (relative error < 1e-7);
// elsewhere 1 - 2 / (e^{2|x|} + 1), which saturates to exactly 1 and never overflows badly
// (e^{2|x|} = inf gives 1).
EMBER_VECTOR_MATH_INLINE float tanh_f32(float x) {
  const float a = std::fabs(x);
  const float a2 = a * a;
  float series = -1382.0f / 155925.0f;
  series = series * a2 + 62.0f / 2835.0f;
  series = series * a2 - 17.0f / 315.0f;
  series = series * a2 + 2.0f / 15.0f;
  series = series * a2 - 1.0f / 3.0f;
  series = series * a2 * a + a;
  const float saturating = 1.0f - 2.0f / (exp_f32(2.0f * a) + 1.0f);
  return std::copysign(select_f32(a < 0.4f, series, saturating), x);
}

EMBER_VECTOR_MATH_INLINE float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

// e^x for x <= 0 in a kernel templated on the element type: exp_nonpositive_f32 for float32,
// std::exp for float64 (so float64 results, which gradcheck relies on, stay exact).
template <class T>
EMBER_VECTOR_MATH_INLINE T exp_nonpositive(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_nonpositive_f32(x);
  else return std::exp(x);
}

// e^x for any x in a kernel templated on the element type: exp_f32 for float32, std::exp for
// float64.
template <class T>
EMBER_VECTOR_MATH_INLINE T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
  else return std::exp(x);
}

#undef EMBER_VECTOR_MATH_INLINE

}  // namespace ember::cpu::EMBER_CPU_KERNELS
