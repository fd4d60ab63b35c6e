// Binary elementwise ops with NumPy broadcasting, their scalar forms and C++ operators.
// Both operands must have the same dtype and device: nothing converts silently. A scalar
// operand takes the tensor's dtype.
#pragma once

#include <string_view>

#include "core/dispatch.h"
#include "core/ops/op_codes.h"
#include "core/tensor.h"

namespace ember {

// The binary ops share one kernel table, keyed by BinaryOp (core/ops/op_codes.h); predicates
// (Eq and after) produce bool.
std::string_view binary_op_name(BinaryOp op);
namespace kernels {
extern KernelTable<void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b)> binary;
}
// Checks dtypes and devices, broadcasts, allocates and runs the kernel; records nothing.
Tensor binary_forward(BinaryOp op, const Tensor& a, const Tensor& b);
// A 0-d tensor of `tensor`'s dtype and device holding `value` (an int64 tensor needs an
// integral value).
Tensor scalar_operand(const Tensor& tensor, double value, std::string_view op);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // floating point only
Tensor pow(const Tensor& base, const Tensor& exponent);  // floating point only
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& base, double exponent);
Tensor pow(double base, const Tensor& exponent);

// Comparisons give bool tensors and have no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// Logical ops treat nonzero as true and give bool tensors.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);

// Reduces a gradient of a broadcast result back to `shape` by summing the broadcast dims:
// the backward of every broadcasting op.
Tensor sum_to(const Tensor& gradient, const Shape& shape);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return add(mul(b, -1.0), a); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);

}  // namespace ember
