// Binary elementwise ops: broadcasting, dtype rules, the CPU kernel and every backward.
#include "core/ops/elementwise.h"

#include <cmath>

#include "core/autocast.h"
#include "core/autograd/record.h"
#include "core/cpu/loops.h"
#include "core/cpu/wrapping.h"
#include "core/dispatch.h"
#include "core/ops/copy.h"
#include "core/ops/factory.h"
#include "core/ops/reduce.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"

namespace ember {
namespace kernels {
// out = op(a, b) with a and b broadcast to out's shape (same dtype; out may be bool).
constinit KernelTable<void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b)> binary{"binary"};
}  // namespace kernels

std::string_view binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Pow: return "pow";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
    case BinaryOp::Eq: return "eq";
    case BinaryOp::Ne: return "ne";
    case BinaryOp::Lt: return "lt";
    case BinaryOp::Le: return "le";
    case BinaryOp::Gt: return "gt";
    case BinaryOp::Ge: return "ge";
    case BinaryOp::LogicalAnd: return "logical_and";
    case BinaryOp::LogicalOr: return "logical_or";
  }
  return "binary";
}

namespace {

// Runs f over out, a, b; when one operand is a single element its value is hoisted out of the
// loop, which keeps the common tensor-with-scalar case a unit-stride, vectorised loop. f takes
// compute_type<T> operands: a 16-bit element is widened to float as it is read, and the result
// rounds once, as it is stored.
template <class R, class T, class F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  using C = compute_type<T>;
  if (b.numel() == 1 && a.sizes() == out.sizes()) {
    const C value = *b.data_ptr<T>();
    cpu::for_each_element<R, T>(out, {a}, [f, value](C x) { return f(x, value); });
  } else if (a.numel() == 1 && b.sizes() == out.sizes()) {
    const C value = *a.data_ptr<T>();
    cpu::for_each_element<R, T>(out, {b}, [f, value](C y) { return f(value, y); });
  } else {
    cpu::for_each_element<R, T, T>(out, {a, b}, f);
  }
}

template <class T>
void arithmetic_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using C = compute_type<T>;
  switch (op) {
    // int64 wraps around past its range, as in PyTorch (cpu/wrapping.h).
    case BinaryOp::Add: return binary_loop<T, T>(out, a, b, [](C x, C y) { return cpu::wrapping_add(x, y); });
    case BinaryOp::Sub: return binary_loop<T, T>(out, a, b, [](C x, C y) { return cpu::wrapping_sub(x, y); });
    case BinaryOp::Mul: return binary_loop<T, T>(out, a, b, [](C x, C y) { return cpu::wrapping_mul(x, y); });
    case BinaryOp::Div: return binary_loop<T, T>(out, a, b, [](C x, C y) { return x / y; });
    case BinaryOp::Pow:
      if constexpr (is_floating_element<T>) {
        return binary_loop<T, T>(out, a, b, [](C x, C y) { return std::pow(x, y); });
      }
      break;
    // NaN wins, as in PyTorch: x != x is true only for NaN.
    case BinaryOp::Maximum: return binary_loop<T, T>(out, a, b, [](C x, C y) { return (x > y || x != x) ? x : y; });
    case BinaryOp::Minimum: return binary_loop<T, T>(out, a, b, [](C x, C y) { return (x < y || x != x) ? x : y; });
    default: break;
  }
  fail("{}: not defined for {}", binary_op_name(op), a.dtype());
}

template <class T>
void predicate_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using C = compute_type<T>;
  switch (op) {
    case BinaryOp::Eq: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x == y; });
    case BinaryOp::Ne: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x != y; });
    case BinaryOp::Lt: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x < y; });
    case BinaryOp::Le: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x <= y; });
    case BinaryOp::Gt: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x > y; });
    case BinaryOp::Ge: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x >= y; });
    case BinaryOp::LogicalAnd:
      return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x != C(0) && y != C(0); });
    case BinaryOp::LogicalOr:
      return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x != C(0) || y != C(0); });
    default: break;
  }
  fail("{}: not defined for {}", binary_op_name(op), a.dtype());
}

void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.dtype() == kBool) {
    visit_any_dtype(a.dtype(), [&]<class T>() { predicate_cpu<T>(op, out, a, b); });
  } else {
    visit_any_numeric(a.dtype(), binary_op_name(op), [&]<class T>() { arithmetic_cpu<T>(op, out, a, b); });
  }
}
EMBER_REGISTER_KERNEL(kernels::binary, DeviceType::CPU, binary_cpu);

bool is_predicate(BinaryOp op) { return op >= BinaryOp::Eq; }

void check_operands(BinaryOp op, const Tensor& a, const Tensor& b) {
  const std::string_view name = binary_op_name(op);
  EMBER_CHECK(a.defined() && b.defined(), "{}: an operand is undefined", name);
  EMBER_CHECK(a.dtype() == b.dtype(), "{}: dtype mismatch: {} and {} (convert one with to() first)", name,
              a.dtype(), b.dtype());
  EMBER_CHECK(a.device() == b.device(), "{}: device mismatch: {} and {} (move one with to() first)", name,
              a.device(), b.device());
  if (!is_predicate(op)) {
    EMBER_CHECK(a.dtype() != kBool, "{}: not defined for bool tensors", name);
  }
  if (op == BinaryOp::Div || op == BinaryOp::Pow) {
    EMBER_CHECK(is_floating_point(a.dtype()), "{}: expected floating point tensors, got {} (convert with to())",
                name, a.dtype());
  }
}

// a with its zeros replaced by ones, so log() of it is 0 there.
Tensor where_nonzero(const Tensor& a) { return add(a, eq(a, 0.0).to(a.dtype())); }

// Gradients of maximum (wins = Gt) or minimum (wins = Lt): the gradient goes to the operand
// that was chosen, and is split evenly where the two are equal.
std::vector<Tensor> tie_split_gradients(const Tensor& grad, const Tensor& a, const Tensor& b, BinaryOp wins) {
  const Tensor ties = mul(binary_forward(BinaryOp::Eq, a, b).to(grad.dtype()), 0.5);
  const Tensor share_a = add(binary_forward(wins, a, b).to(grad.dtype()), ties);
  const Tensor share_b = add(binary_forward(wins, b, a).to(grad.dtype()), ties);
  return autograd::grads(sum_to(mul(grad, share_a), a.sizes()), sum_to(mul(grad, share_b), b.sizes()));
}

}  // namespace

Tensor binary_forward(BinaryOp op, const Tensor& a, const Tensor& b) {
  check_operands(op, a, b);
  const DType dtype = is_predicate(op) ? kBool : a.dtype();
  Tensor out = a.sizes() == b.sizes()
                   ? make_tensor(a.sizes(), dtype, a.device())
                   : make_tensor(broadcast_shapes(a.sizes(), b.sizes(), binary_op_name(op)), dtype, a.device());
  kernels::binary.get(a.device(), binary_op_name(op))(op, out, a, b);
  return out;
}

Tensor scalar_operand(const Tensor& tensor, double value, std::string_view op) {
  EMBER_CHECK(tensor.defined(), "{}: tensor is undefined", op);
  if (tensor.dtype() == kInt64) {
    EMBER_CHECK(value == std::floor(value) && std::abs(value) < 0x1p63,
                "{}: scalar {} is not an integer (in int64's range) but the tensor is int64", op, value);
  }
  // Converted as PyTorch converts a scalar operand: a value beyond a floating dtype's range
  // becomes inf (mul(x, 1e300) of a float32 x is inf), where full, which stores the value as
  // given, refuses it.
  Tensor scalar = make_tensor({}, tensor.dtype(), tensor.device());
  kernels::fill[scalar.device()](scalar, value);
  return scalar;
}

Tensor sum_to(const Tensor& gradient, const Shape& shape) {
  if (gradient.sizes() == shape) return gradient;
  const int64_t lead = gradient.dim() - static_cast<int64_t>(shape.size());
  EMBER_CHECK(lead >= 0, "sum_to: cannot reduce shape {} to {}", shape_str(gradient.sizes()), shape_str(shape));
  Shape dims;
  for (int64_t d = 0; d < gradient.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && gradient.sizes()[d] != 1)) dims.push_back(d);
  }
  if (dims.empty()) return reshape(gradient, shape);
  return reshape(sum(gradient, dims, /*keepdim=*/true), shape);
}

Tensor add(const Tensor& a, const Tensor& b) {
  if (auto cast = autocast::widest_operands(a, b)) return add((*cast)[0], (*cast)[1]);
  Tensor out = binary_forward(BinaryOp::Add, a, b);
  // Without broadcasting the gradient passes through as is, and a closure with no captures
  // records without allocating.
  if (a.sizes() == b.sizes()) {
    return autograd::record("add", out, {a, b}, [](const Tensor& grad) { return autograd::grads(grad, grad); });
  }
  return autograd::record("add", out, {a, b}, [sa = a.sizes(), sb = b.sizes()](const Tensor& grad) {
    return autograd::grads(sum_to(grad, sa), sum_to(grad, sb));
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (auto cast = autocast::widest_operands(a, b)) return sub((*cast)[0], (*cast)[1]);
  Tensor out = binary_forward(BinaryOp::Sub, a, b);
  if (a.sizes() == b.sizes()) {
    return autograd::record("sub", out, {a, b}, [](const Tensor& grad) { return autograd::grads(grad, neg(grad)); });
  }
  return autograd::record("sub", out, {a, b}, [sa = a.sizes(), sb = b.sizes()](const Tensor& grad) {
    return autograd::grads(sum_to(grad, sa), sum_to(neg(grad), sb));
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (auto cast = autocast::widest_operands(a, b)) return mul((*cast)[0], (*cast)[1]);
  Tensor out = binary_forward(BinaryOp::Mul, a, b);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record("mul", out, {a, b},
                          [sa = autograd::save(need_b ? a : Tensor()), sb = autograd::save(need_a ? b : Tensor()),
                           shape_a = a.sizes(), shape_b = b.sizes()](const Tensor& grad) {
                            Tensor grad_a = sb.get().defined() ? sum_to(mul(grad, sb.get()), shape_a) : Tensor();
                            Tensor grad_b = sa.get().defined() ? sum_to(mul(grad, sa.get()), shape_b) : Tensor();
                            return autograd::grads(grad_a, grad_b);
                          });
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (auto cast = autocast::widest_operands(a, b)) return div((*cast)[0], (*cast)[1]);
  Tensor out = binary_forward(BinaryOp::Div, a, b);
  return autograd::record("div", out, {a, b},
                          [sb = autograd::save(b), so = autograd::save(out), shape_a = a.sizes(),
                           shape_b = b.sizes()](const Tensor& grad) {
                            const Tensor& b = sb.get();
                            // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2 = -out/b
                            Tensor grad_a = div(grad, b);
                            Tensor grad_b = neg(mul(grad_a, so.get()));
                            return autograd::grads(sum_to(grad_a, shape_a), sum_to(grad_b, shape_b));
                          });
}

Tensor pow(const Tensor& base, const Tensor& exponent) {
  if (auto cast = autocast::widest_operands(base, exponent)) return pow((*cast)[0], (*cast)[1]);
  Tensor out = binary_forward(BinaryOp::Pow, base, exponent);
  return autograd::record(
      "pow", out, {base, exponent},
      [sa = autograd::save(base), sb = autograd::save(exponent), so = autograd::save(out), shape_a = base.sizes(),
       shape_b = exponent.sizes()](const Tensor& grad) {
        const Tensor &a = sa.get(), &b = sb.get();
        // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log(a), taken as 0 where a == 0 (as PyTorch).
        Tensor grad_a = mul(grad, mul(b, pow(a, sub(b, 1.0))));
        Tensor log_a = log(where_nonzero(a));
        Tensor grad_b = mul(grad, mul(so.get(), log_a));
        return autograd::grads(sum_to(grad_a, shape_a), sum_to(grad_b, shape_b));
      });
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  if (auto cast = autocast::widest_operands(a, b)) return maximum((*cast)[0], (*cast)[1]);
  Tensor out = binary_forward(BinaryOp::Maximum, a, b);
  return autograd::record("maximum", out, {a, b},
                          [sa = autograd::save(a), sb = autograd::save(b)](const Tensor& grad) {
                            return tie_split_gradients(grad, sa.get(), sb.get(), BinaryOp::Gt);
                          });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  if (auto cast = autocast::widest_operands(a, b)) return minimum((*cast)[0], (*cast)[1]);
  Tensor out = binary_forward(BinaryOp::Minimum, a, b);
  return autograd::record("minimum", out, {a, b},
                          [sa = autograd::save(a), sb = autograd::save(b)](const Tensor& grad) {
                            return tie_split_gradients(grad, sa.get(), sb.get(), BinaryOp::Lt);
                          });
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_operand(a, b, "add")); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_operand(a, b, "sub")); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_operand(a, b, "mul")); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_operand(a, b, "div")); }
Tensor pow(double base, const Tensor& exponent) { return pow(scalar_operand(exponent, base, "pow"), exponent); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_operand(b, a, "div"), b); }
Tensor operator-(const Tensor& x) { return neg(x); }

Tensor pow(const Tensor& base, double exponent) {
  EMBER_CHECK(base.defined(), "pow: tensor is undefined");
  EMBER_CHECK(is_floating_point(base.dtype()), "pow: expected a floating point tensor, got {}", base.dtype());
  Tensor out;
  if (exponent == 2.0) {
    NoGradGuard no_grad;
    out = mul(base, base);  // exact, and faster than std::pow
  } else {
    out = binary_forward(BinaryOp::Pow, base, scalar_operand(base, exponent, "pow"));
  }
  return autograd::record("pow", out, {base}, [sa = autograd::save(base), exponent](const Tensor& grad) {
    const Tensor& a = sa.get();
    Tensor derivative = exponent == 2.0 ? mul(a, 2.0) : mul(pow(a, exponent - 1.0), exponent);
    return autograd::grads(mul(grad, derivative));
  });
}

#define EMBER_PREDICATE(name, op)                                                                        \
  Tensor name(const Tensor& a, const Tensor& b) {                                                       \
    if (auto cast = autocast::widest_operands(a, b)) return name((*cast)[0], (*cast)[1]);               \
    return autograd::non_differentiable(#name, binary_forward(op, a, b));                               \
  }                                                                                                     \
  Tensor name(const Tensor& a, double b) { return name(a, scalar_operand(a, b, #name)); }
EMBER_PREDICATE(eq, BinaryOp::Eq)
EMBER_PREDICATE(ne, BinaryOp::Ne)
EMBER_PREDICATE(lt, BinaryOp::Lt)
EMBER_PREDICATE(le, BinaryOp::Le)
EMBER_PREDICATE(gt, BinaryOp::Gt)
EMBER_PREDICATE(ge, BinaryOp::Ge)
#undef EMBER_PREDICATE

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return autograd::non_differentiable("logical_and", binary_forward(BinaryOp::LogicalAnd, a, b));
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return autograd::non_differentiable("logical_or", binary_forward(BinaryOp::LogicalOr, a, b));
}
Tensor logical_not(const Tensor& x) {
  EMBER_CHECK(x.defined(), "logical_not: tensor is undefined");
  return autograd::non_differentiable("logical_not", binary_forward(BinaryOp::Eq, x, scalar_tensor(0, x.options())));
}

// Tensor member shorthands for the ops above.
Tensor Tensor::pow(double exponent) const { return ember::pow(*this, exponent); }

}  // namespace ember
