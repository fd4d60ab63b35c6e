// Unary elementwise ops: the CPU kernel for each, and each backward written with tensor ops.
#include "core/ops/unary.h"

#include <cmath>
#include <numbers>
#include <optional>

#include "core/autograd/record.h"
#include "core/cpu/loops.h"
#include "core/cpu/vector_function_loops.h"
#include "core/cpu/wrapping.h"
#include "core/ops/clamp_bounds.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/scalar_conversion.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(UnaryOp op, const Tensor& out, const Tensor& x)> unary{"unary"};
constinit KernelTable<void(const Tensor& out, const Tensor& x, std::optional<double> min, std::optional<double> max)>
    clamp{"clamp"};
constinit KernelTable<void(UnaryOp op, const Tensor& grad_x, const Tensor& grad, const Tensor& x)>
    activation_backward{"activation_backward"};
}  // namespace kernels

std::string_view unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Sin: return "sin";
    case UnaryOp::Cos: return "cos";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Erf: return "erf";
    case UnaryOp::Gelu: return "gelu";
    case UnaryOp::GeluTanh: return "gelu";
    case UnaryOp::Sign: return "sign";
    case UnaryOp::IsFinite: return "isfinite";
    case UnaryOp::IsNan: return "isnan";
  }
  return "unary";
}

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;   // sqrt(2 / pi)
constexpr double kInvSqrt2 = 0.7071067811865476;      // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.3989422804014327;    // 1 / sqrt(2 pi)

// The rung's float32 vector function that computes `op`, where there is one.
std::optional<cpu::VectorFunction> vector_function(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp: return cpu::VectorFunction::kExp;
    case UnaryOp::Tanh: return cpu::VectorFunction::kTanh;
    case UnaryOp::Sigmoid: return cpu::VectorFunction::kSigmoid;
    case UnaryOp::Erf: return cpu::VectorFunction::kErf;
    case UnaryOp::Gelu: return cpu::VectorFunction::kGelu;
    case UnaryOp::GeluTanh: return cpu::VectorFunction::kGeluTanh;
    default: return std::nullopt;
  }
}

// Each lambda takes and returns compute_type<T> (C): a 16-bit element is widened to float as it
// is read and its result rounds once, as it is stored; float32 and float64 compute in their own type.
template <class T>
void math_cpu(UnaryOp op, const Tensor& out, const Tensor& x) {
  using cpu::for_each_element;
  using C = compute_type<T>;
  switch (op) {
    // int64's smallest negates to itself, as in PyTorch (cpu/wrapping.h).
    case UnaryOp::Neg: return for_each_element<T, T>(out, {x}, [](C v) { return cpu::wrapping_neg(v); });
    case UnaryOp::Abs: return for_each_element<T, T>(out, {x}, [](C v) { return v < 0 ? cpu::wrapping_neg(v) : v; });
    case UnaryOp::Relu: return for_each_element<T, T>(out, {x}, [](C v) { return v > 0 ? v : C(0); });
    case UnaryOp::Sign: return for_each_element<T, T>(out, {x}, [](C v) { return C((v > 0) - (v < 0)); });
    default: break;
  }
  if constexpr (std::is_same_v<C, float>) {
    // float32 exp, erf, gelu, tanh and sigmoid by the rung's vector functions
    // (core/cpu/kernels/vector_functions.h), for float32 and the 16-bit formats, which compute in
    // float: libm calls would keep these loops scalar. float64 stays on std:: functions below,
    // so gradcheck sees exact values.
    if (const std::optional<cpu::VectorFunction> function = vector_function(op)) {
      return cpu::map_vector_function<T>(*function, out, x);
    }
  }
  if constexpr (is_floating_element<T>) {
    switch (op) {
      case UnaryOp::Exp: return for_each_element<T, T>(out, {x}, [](C v) { return std::exp(v); });
      case UnaryOp::Log: return for_each_element<T, T>(out, {x}, [](C v) { return std::log(v); });
      case UnaryOp::Sqrt: return for_each_element<T, T>(out, {x}, [](C v) { return std::sqrt(v); });
      case UnaryOp::Rsqrt: return for_each_element<T, T>(out, {x}, [](C v) { return C(1) / std::sqrt(v); });
      case UnaryOp::Sin: return for_each_element<T, T>(out, {x}, [](C v) { return std::sin(v); });
      case UnaryOp::Cos: return for_each_element<T, T>(out, {x}, [](C v) { return std::cos(v); });
      case UnaryOp::Tanh: return for_each_element<T, T>(out, {x}, [](C v) { return std::tanh(v); });
      case UnaryOp::Sigmoid: return for_each_element<T, T>(out, {x}, [](C v) { return C(1) / (C(1) + std::exp(-v)); });
      case UnaryOp::Erf: return for_each_element<T, T>(out, {x}, [](C v) { return std::erf(v); });
      case UnaryOp::Gelu:
        return for_each_element<T, T>(out, {x}, [](C v) { return C(0.5) * v * (C(1) + std::erf(v * C(kInvSqrt2))); });
      case UnaryOp::GeluTanh:
        return for_each_element<T, T>(out, {x}, [](C v) {
          return C(0.5) * v * (C(1) + std::tanh(C(kSqrt2OverPi) * (v + C(0.044715) * v * v * v)));
        });
      default: break;
    }
  }
  fail("{}: not defined for {}", unary_op_name(op), x.dtype());
}

void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& x) {
  if (op == UnaryOp::IsFinite || op == UnaryOp::IsNan) {
    visit_any_dtype(x.dtype(), [&]<class T>() {
      using C = compute_type<T>;
      if constexpr (is_floating_element<T>) {
        if (op == UnaryOp::IsFinite) cpu::for_each_element<bool, T>(out, {x}, [](C v) { return std::isfinite(v); });
        else cpu::for_each_element<bool, T>(out, {x}, [](C v) { return std::isnan(v); });
      } else {
        const bool value = op == UnaryOp::IsFinite;
        cpu::for_each_element<bool>(out, {}, [value]() { return value; });
      }
    });
    return;
  }
  visit_any_numeric(x.dtype(), unary_op_name(op), [&]<class T>() { math_cpu<T>(op, out, x); });
}
EMBER_REGISTER_KERNEL(kernels::unary, DeviceType::CPU, unary_cpu);

void clamp_cpu(const Tensor& out, const Tensor& x, std::optional<double> min, std::optional<double> max) {
  visit_any_numeric(x.dtype(), "clamp", [&]<class T>() {
    // A 16-bit tensor is compared with the bounds in float: a bound between two 16-bit values
    // gives the same result as its rounded value would. An absent bound is infinite, so that it
    // leaves infinities as they are (float's largest would turn inf into 3.4e38).
    using C = compute_type<T>;
    const C lo = min ? static_cast<C>(*min) : absent_lower_bound<C>();
    const C hi = max ? static_cast<C>(*max) : absent_upper_bound<C>();
    cpu::for_each_element<T, T>(out, {x}, [lo, hi](C v) { return v < lo ? lo : (v > hi ? hi : v); });
  });
}
EMBER_REGISTER_KERNEL(kernels::clamp, DeviceType::CPU, clamp_cpu);

// grad * f'(x) for the activations, one pass. The derivatives are those of derivative() below;
// float32 GELUs use the rung's vectorised erf, exp and tanh.
// A 16-bit gradient computes in float (C) and rounds once, on store.
template <class T>
void activation_backward_typed(UnaryOp op, const Tensor& grad_x, const Tensor& grad, const Tensor& x) {
  using cpu::for_each_element;
  using C = compute_type<T>;
  switch (op) {
    case UnaryOp::Relu:
      return for_each_element<T, T, T>(grad_x, {grad, x}, [](C g, C v) { return v > 0 ? g : C(0); });
    case UnaryOp::Gelu:
    case UnaryOp::GeluTanh:
      // float32 and 16-bit: the rung's vector functions (core/cpu/kernels/vector_functions.h).
      if constexpr (std::is_same_v<C, float>) {
        return cpu::vector_function_backward<T>(*vector_function(op), grad_x, grad, x);
      } else if (op == UnaryOp::Gelu) {
        // d/dx x Phi(x) = Phi(x) + x phi(x)
        return for_each_element<T, T, T>(grad_x, {grad, x}, [](C g, C v) {
          const C cdf = C(0.5) * (C(1) + std::erf(v * C(kInvSqrt2)));
          const C pdf = C(kInvSqrt2Pi) * std::exp(C(-0.5) * v * v);
          return g * (cdf + v * pdf);
        });
      } else {
        // y = 0.5 x (1 + t), t = tanh(u), u = c (x + 0.044715 x^3):
        // dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2)
        return for_each_element<T, T, T>(grad_x, {grad, x}, [](C g, C v) {
          const C c = C(kSqrt2OverPi), x2 = v * v;
          const C t = std::tanh(c * (v + C(0.044715) * x2 * v));
          return g * (C(0.5) * (C(1) + t) + C(0.5) * v * (C(1) - t * t) * c * (C(1) + C(3 * 0.044715) * x2));
        });
      }
    default: fail("{}: has no fused backward", unary_op_name(op));
  }
}

void activation_backward_cpu(UnaryOp op, const Tensor& grad_x, const Tensor& grad, const Tensor& x) {
  visit_any_floating(x.dtype(), unary_op_name(op),
                     [&]<class T>() { activation_backward_typed<T>(op, grad_x, grad, x); });
}
EMBER_REGISTER_KERNEL(kernels::activation_backward, DeviceType::CPU, activation_backward_cpu);

bool has_fused_backward(UnaryOp op) {
  return op == UnaryOp::Relu || op == UnaryOp::Gelu || op == UnaryOp::GeluTanh;
}

bool is_math(UnaryOp op) {
  return op != UnaryOp::Neg && op != UnaryOp::Abs && op != UnaryOp::Relu && op != UnaryOp::Sign &&
         op != UnaryOp::IsFinite && op != UnaryOp::IsNan;
}

// The derivative of each op as a tensor expression of its input x or its output y (only the
// one it reads is defined). The activations (relu, gelu) have a fused backward instead.
Tensor derivative(UnaryOp op, const Tensor& x, const Tensor& y) {
  switch (op) {
    case UnaryOp::Neg: return full_like(x, -1.0);
    case UnaryOp::Abs: return unary_forward(UnaryOp::Sign, x);
    case UnaryOp::Exp: return y;
    case UnaryOp::Log: return 1.0 / x;
    case UnaryOp::Sqrt: return 0.5 / y;
    case UnaryOp::Rsqrt: return mul(pow(y, 3.0), -0.5);  // d x^-1/2 = -1/2 x^-3/2
    case UnaryOp::Sin: return cos(x);
    case UnaryOp::Cos: return neg(sin(x));
    case UnaryOp::Tanh: return 1.0 - mul(y, y);
    case UnaryOp::Sigmoid: return mul(y, 1.0 - y);
    case UnaryOp::Erf: return mul(exp(neg(mul(x, x))), 2.0 / std::sqrt(std::numbers::pi));
    default: fail("{}: has no derivative", unary_op_name(op));
  }
}

// The derivative of an activation with a fused backward, as a tensor expression of x: what
// backward uses under create_graph, where the fused kernel's result would have no history.
// Composite rather than a backward op with a backward of its own: the activations are
// elementwise, so the expression is short and its own derivative comes from the ops it uses.
Tensor activation_derivative(UnaryOp op, const Tensor& x) {
  switch (op) {
    // 0 or 1: its own derivative is 0 (almost everywhere), so a constant is right here.
    case UnaryOp::Relu: return gt(x, 0.0).to(x.dtype());
    case UnaryOp::Gelu: {
      // d/dx x Phi(x) = Phi(x) + x phi(x)
      const Tensor cdf = mul(add(erf(mul(x, 1.0 / std::numbers::sqrt2)), 1.0), 0.5);
      const Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 1.0 / std::sqrt(2.0 * std::numbers::pi));
      return add(cdf, mul(x, pdf));
    }
    case UnaryOp::GeluTanh: {
      // gelu ~ x/2 (1 + tanh(u)), u = c (x + 0.044715 x^3), c = sqrt(2/pi)
      const double c = std::sqrt(2.0 / std::numbers::pi);
      const Tensor x2 = mul(x, x);
      const Tensor t = tanh(mul(mul(x, add(mul(x2, 0.044715), 1.0)), c));
      const Tensor du = mul(add(mul(x2, 3.0 * 0.044715), 1.0), c);
      return add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, 0.5), 1.0 - mul(t, t)), du));
    }
    default: fail("{}: has no fused backward", unary_op_name(op));
  }
}

Tensor unary(UnaryOp op, const Tensor& x) {
  const std::string_view name = unary_op_name(op);
  EMBER_CHECK(x.defined(), "{}: tensor is undefined", name);
  if (is_math(op)) {
    EMBER_CHECK(is_floating_point(x.dtype()), "{}: expected a floating point tensor, got {}", name, x.dtype());
  }
  Tensor out = unary_forward(op, x);
  static constexpr const char* kNames[] = {"neg", "abs",  "exp",     "log",  "sqrt", "rsqrt",   "sin",
                                           "cos", "tanh", "sigmoid", "relu", "erf",  "gelu",    "gelu",
                                           "sign", "isfinite", "isnan"};
  // Save only the tensor the derivative reads, so that writing in place to the other one
  // (y = sin(x); y.mul_(2)) stays legal, as in PyTorch.
  const bool uses_output = op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt ||
                           op == UnaryOp::Tanh || op == UnaryOp::Sigmoid;
  return autograd::record(kNames[static_cast<int>(op)], out, {x},
                          [op, sx = autograd::save(uses_output ? Tensor() : x),
                           sy = autograd::save(uses_output ? out : Tensor())](const Tensor& grad) {
                            if (has_fused_backward(op)) {
                              const Tensor& x = sx.get();
                              if (GradMode::is_enabled()) {  // create_graph
                                const Tensor g = grad.dtype() == x.dtype() ? grad : grad.to(x.dtype());
                                return autograd::grads(mul(g, activation_derivative(op, x)));
                              }
                              Tensor grad_x = make_tensor(x.sizes(), x.dtype(), x.device());
                              kernels::activation_backward.get(x.device(), op == UnaryOp::Relu ? "relu_backward" : "gelu_backward")(
                                  op, grad_x, grad.dtype() == x.dtype() ? grad : grad.to(x.dtype()), x);
                              return autograd::grads(grad_x);
                            }
                            return autograd::grads(mul(grad, derivative(op, sx.get(), sy.get())));
                          });
}

}  // namespace

Tensor unary_forward(UnaryOp op, const Tensor& x) {
  const bool predicate = op == UnaryOp::IsFinite || op == UnaryOp::IsNan;
  Tensor out = make_tensor(x.sizes(), predicate ? kBool : x.dtype(), x.device());
  kernels::unary.get(x.device(), unary_op_name(op))(op, out, x);
  return out;
}

Tensor neg(const Tensor& x) { return unary(UnaryOp::Neg, x); }
Tensor abs(const Tensor& x) { return unary(UnaryOp::Abs, x); }
Tensor exp(const Tensor& x) { return unary(UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary(UnaryOp::Log, x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(UnaryOp::Rsqrt, x); }
Tensor sin(const Tensor& x) { return unary(UnaryOp::Sin, x); }
Tensor cos(const Tensor& x) { return unary(UnaryOp::Cos, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::Sigmoid, x); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::Relu, x); }
Tensor erf(const Tensor& x) { return unary(UnaryOp::Erf, x); }
Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  return unary(approximate == GeluApproximation::Tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu, x);
}

Tensor isfinite(const Tensor& x) {
  EMBER_CHECK(x.defined(), "isfinite: tensor is undefined");
  return unary_forward(UnaryOp::IsFinite, x);
}
Tensor isnan(const Tensor& x) {
  EMBER_CHECK(x.defined(), "isnan: tensor is undefined");
  return unary_forward(UnaryOp::IsNan, x);
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  EMBER_CHECK(x.defined(), "clamp: tensor is undefined");
  EMBER_CHECK(x.dtype() != kBool, "clamp: not defined for bool tensors");
  // PyTorch answers a NaN bound with NaN everywhere; ember refuses it rather than ignore it.
  EMBER_CHECK(!(min && std::isnan(*min)) && !(max && std::isnan(*max)), "clamp: a bound is NaN (min {}, max {})",
              min ? fmt::format("{}", *min) : "none", max ? fmt::format("{}", *max) : "none");
  EMBER_CHECK(!(min && max && *min > *max), "clamp: min {} is greater than max {}", *min, *max);
  // The kernel converts the bounds to x's dtype: one it cannot hold would be undefined
  // behaviour (int64) or a different bound (a finite one become inf).
  if (min) check_storable(*min, x.dtype(), "clamp");
  if (max) check_storable(*max, x.dtype(), "clamp");
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  kernels::clamp[x.device()](out, x, min, max);
  return autograd::record("clamp", out, {x}, [sx = autograd::save(x), min, max](const Tensor& grad) {
    // The gradient passes where x lies inside [min, max] (bounds included, as in PyTorch).
    Tensor inside = ones_like(sx.get()).to(kBool);
    if (min) inside = logical_and(inside, ge(sx.get(), *min));
    if (max) inside = logical_and(inside, le(sx.get(), *max));
    return autograd::grads(mul(grad, inside.to(grad.dtype())));
  });
}

// Tensor member shorthands for the ops above.
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::neg() const { return ember::neg(*this); }

}  // namespace ember
