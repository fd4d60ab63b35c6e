// In-place ops: write into x through the binary and fill kernels, bump the version counter,
// and (in grad mode) give x a new history.
#include "core/ops/inplace.h"

#include <cmath>

#include "core/autograd/record.h"
#include "core/memory_overlap.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/scalar_conversion.h"

namespace ember {

void mark_written_in_place(std::span<const Tensor> written) {
  for (const Tensor& tensor : written) {
    if (tensor.defined()) tensor.impl()->storage->bump_version();
  }
}

void mark_written_in_place(const Tensor& written) { mark_written_in_place(std::span<const Tensor>(&written, 1)); }

namespace {

// The operands of x = op(x, other) in place: other broadcasts to x's shape, never the other way.
void check_binary_inplace(const char* name, const Tensor& x, const Tensor& other) {
  EMBER_CHECK(x.defined() && other.defined(), "{}: tensor is undefined", name);
  EMBER_CHECK(x.dtype() == other.dtype(), "{}: dtype mismatch: {} and {} (convert with to() first)", name,
              x.dtype(), other.dtype());
  EMBER_CHECK(x.device() == other.device(), "{}: device mismatch: {} and {}", name, x.device(), other.device());
  EMBER_CHECK(x.dtype() != kBool, "{}: not defined for bool tensors", name);
  EMBER_CHECK(is_broadcastable_to(other.sizes(), x.sizes()),
              "{}: shape {} cannot be broadcast to the shape {} of the tensor written in place", name,
              shape_str(other.sizes()), shape_str(x.sizes()));
}

// x = op(x, other) in place.
void binary_inplace(BinaryOp op, const char* name, Tensor& x, const Tensor& other) {
  check_binary_inplace(name, x, other);
  autograd::check_inplace(name, x, {other});
  check_no_internal_overlap(x, name);
  const Tensor readable = input_safe_to_read(x, other, name);
  kernels::binary.get(x.device(), name)(op, x, x, readable);
  mark_written_in_place(x);
}

}  // namespace

Tensor& add_(Tensor& x, const Tensor& other, double alpha) {
  // A 16-bit other * alpha is rounded before the add, and alpha with it (a scalar operand takes
  // the tensor's dtype): the result rounds twice, the first time by a fraction of the update
  // only.
  // The overlap check sees other as given: scaled, it would be a fresh tensor that hides it.
  if (alpha != 1.0) check_binary_inplace("add_", x, other);
  const Tensor scaled =
      alpha == 1.0 ? other : mul(input_safe_to_read(x, other, "add_"), scalar_operand(other, alpha, "add_"));
  binary_inplace(BinaryOp::Add, "add_", x, scaled);
  autograd::record_inplace("add_", x, {other}, [alpha, shape = other.sizes()](const Tensor& grad) {
    return autograd::grads(grad, sum_to(alpha == 1.0 ? grad : mul(grad, alpha), shape));
  });
  return x;
}

Tensor& add_(Tensor& x, double other) { return add_(x, scalar_operand(x, other, "add_")); }

Tensor& mul_(Tensor& x, const Tensor& other) {
  // The old value of x is needed for other's gradient: keep a copy only when it will be used.
  // The copy keeps x's history from before the write, which create_graph follows.
  const Tensor copy = GradMode::is_enabled() && other.requires_grad() ? x.clone().detach() : Tensor();
  const autograd::SavedTensor old_x = x.requires_grad() ? autograd::save(copy, x) : autograd::save(copy);
  binary_inplace(BinaryOp::Mul, "mul_", x, other);
  autograd::record_inplace("mul_", x, {other},
                           [old_x, so = autograd::save(other), shape = other.sizes()](const Tensor& grad) {
                             Tensor grad_other = old_x.get().defined() ? sum_to(mul(grad, old_x.get()), shape) : Tensor();
                             return autograd::grads(mul(grad, so.get()), grad_other);
                           });
  return x;
}

Tensor& mul_(Tensor& x, double other) { return mul_(x, scalar_operand(x, other, "mul_")); }

Tensor& fill_(Tensor& x, double value) {
  autograd::check_inplace("fill_", x, {});
  check_storable(value, x.dtype(), "fill_");
  kernels::fill[x.device()](x, value);
  mark_written_in_place(x);
  autograd::record_inplace("fill_", x, {}, [](const Tensor&) { return autograd::grads(Tensor()); });
  return x;
}

Tensor& zero_(Tensor& x) { return fill_(x, 0.0); }

// Tensor member shorthands for the ops above.
Tensor& Tensor::add_(const Tensor& other, double alpha) { return ember::add_(*this, other, alpha); }
Tensor& Tensor::add_(double other) { return ember::add_(*this, other); }
Tensor& Tensor::mul_(const Tensor& other) { return ember::mul_(*this, other); }
Tensor& Tensor::mul_(double other) { return ember::mul_(*this, other); }
Tensor& Tensor::zero_() { return ember::zero_(*this); }
Tensor& Tensor::fill_(double value) { return ember::fill_(*this, value); }

}  // namespace ember
