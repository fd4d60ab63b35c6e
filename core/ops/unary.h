// Unary elementwise ops. Math functions take floating point tensors; neg, abs, relu and clamp
// also take int64.
#pragma once

#include <optional>

#include <string_view>

#include "core/dispatch.h"
#include "core/ops/op_codes.h"
#include "core/tensor.h"

namespace ember {

// The unary ops share one kernel table, keyed by UnaryOp (core/ops/op_codes.h).
std::string_view unary_op_name(UnaryOp op);
namespace kernels {
extern KernelTable<void(UnaryOp op, const Tensor& out, const Tensor& x)> unary;
extern KernelTable<void(const Tensor& out, const Tensor& x, std::optional<double> min, std::optional<double> max)>
    clamp;
// The fused backward of the activations (Relu, Gelu, GeluTanh): grad_x = grad * f'(x) in one
// pass, where the composite expression would make several passes over a large tensor.
extern KernelTable<void(UnaryOp op, const Tensor& grad_x, const Tensor& grad, const Tensor& x)> activation_backward;
}  // namespace kernels
// Allocates and runs the kernel; records nothing.
Tensor unary_forward(UnaryOp op, const Tensor& x);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor erf(const Tensor& x);

// GELU: x * Phi(x) with the exact erf form, or the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as torch.nn.functional.gelu.
enum class GeluApproximation { None, Tanh };
Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::None);

// Clamps to [min, max]; either bound may be absent. The gradient flows where x is inside.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

// Bool tensors, no gradient: where x is finite, NaN.
Tensor isfinite(const Tensor& x);
Tensor isnan(const Tensor& x);

}  // namespace ember
