// The float32 activations and transcendental functions over arrays: the unary ops' exp, tanh,
// sigmoid, erf and both GELUs, and the GELUs' fused backward, on vector_math.h's functions at the
// rung's vector width.
#pragma once

#include <cstdint>

#include "core/cpu/kernel_table.h"
#include "core/cpu/kernels/rung_namespace.h"
#include "core/cpu/kernels/vector_math.h"

namespace ember::cpu::EMBER_CPU_KERNELS {

inline constexpr float kSqrt2OverPiF = 0.79788456080286536f;
inline constexpr float kGeluCubic = 0.044715f;

// GELU's tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline __attribute__((always_inline)) float gelu_tanh_f32(float x) {
  return 0.5f * x * (1.0f + tanh_f32(kSqrt2OverPiF * (x + kGeluCubic * x * x * x)));
}

// Its derivative: with t = tanh(u), u = c (x + 0.044715 x^3),
//   0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2).
inline __attribute__((always_inline)) float gelu_tanh_derivative_f32(float x) {
  const float x2 = x * x;
  const float t = tanh_f32(kSqrt2OverPiF * (x + kGeluCubic * x2 * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPiF * (1.0f + 3.0f * kGeluCubic * x2);
}

// One loop per function, so that each vectorises with its body inlined.
template <class F>
inline void map_each(const float* x, int64_t n, float* out, F f) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = f(x[i]);
}

// out[i] = f(x[i]) for i < n (out may be x).
inline void map_vector_function(VectorFunction function, const float* x, int64_t n, float* out) {
  switch (function) {
    case VectorFunction::kExp: return map_each(x, n, out, [](float v) __attribute__((always_inline)) { return exp_f32(v); });
    case VectorFunction::kTanh: return map_each(x, n, out, [](float v) __attribute__((always_inline)) { return tanh_f32(v); });
    case VectorFunction::kSigmoid:
      return map_each(x, n, out, [](float v) __attribute__((always_inline)) { return sigmoid_f32(v); });
    case VectorFunction::kErf: return map_each(x, n, out, [](float v) __attribute__((always_inline)) { return erf_f32(v); });
    case VectorFunction::kGelu: return map_each(x, n, out, [](float v) __attribute__((always_inline)) { return gelu_f32(v); });
    case VectorFunction::kGeluTanh:
      return map_each(x, n, out, [](float v) __attribute__((always_inline)) { return gelu_tanh_f32(v); });
  }
}

// out[i] = grad[i] * f'(x[i]) for the GELUs (out may be grad or x); any other function leaves
// out unwritten (the caller's table says which have a fused backward).
inline void vector_function_backward(VectorFunction function, const float* grad, const float* x, int64_t n,
                                     float* out) {
  if (function == VectorFunction::kGelu) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = grad[i] * gelu_derivative_f32(x[i]);
  } else if (function == VectorFunction::kGeluTanh) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = grad[i] * gelu_tanh_derivative_f32(x[i]);
  }
}

}  // namespace ember::cpu::EMBER_CPU_KERNELS
