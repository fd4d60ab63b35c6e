// The device side of the unary ops (cuda/ops/unary.cu): every UnaryOp, and clamp. fmt-free.
#pragma once

#include <cstdint>

#include "core/ops/op_codes.h"
#include "cuda/common/half_elements.h"
#include "cuda/common/strided_layout.h"

namespace ember::cuda {

// out[i] = op(x[i]) over layout (operand 0 out, operand 1 x). T: float, double, __nv_bfloat16
// and __half take every op but the predicates (16-bit ones computed in float, rounded on store);
// int64_t takes Neg, Abs, Relu and Sign (the caller checks).
template <class T>
void launch_unary(UnaryOp op, const StridedLayout<2>& layout, int64_t n, T* out, const T* x);
// out[i] = IsFinite or IsNan of x[i]. T: float, double, __nv_bfloat16, __half, int64_t, bool.
template <class T>
void launch_unary_predicate(UnaryOp op, const StridedLayout<2>& layout, int64_t n, bool* out, const T* x);
// grad_x[i] = grad[i] * f'(x[i]) for f = Relu, Gelu or GeluTanh, over layout (operands grad_x,
// grad, x): the fused backward of the activations. T: float, double, __nv_bfloat16, __half.
template <class T>
void launch_activation_backward(UnaryOp op, const StridedLayout<3>& layout, int64_t n, T* grad_x, const T* grad,
                                const T* x);
// out[i] = x[i] clamped to [low, high] (compared in the compute type); NaN stays NaN. T: float,
// double, __nv_bfloat16, __half, int64_t.
template <class T>
void launch_clamp(const StridedLayout<2>& layout, int64_t n, T* out, const T* x, compute_t<T> low,
                  compute_t<T> high);

}  // namespace ember::cuda
