// Making tensors: filled, ranged, random, or from C++ values.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/dispatch.h"
#include "core/random.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
extern KernelTable<void(const Tensor& out, double value)> fill;
// out[i] = start + i * step
extern KernelTable<void(const Tensor& out, double start, double step)> arange;
// Uniform [0, 1), standard normal, and integers in [low, low + range) from a Philox draw; the
// element-to-word mapping is documented in factory.cpp and must match on every device.
extern KernelTable<void(const Tensor& out, PhiloxState state)> uniform;
extern KernelTable<void(const Tensor& out, PhiloxState state)> normal;
extern KernelTable<void(const Tensor& out, int64_t low, uint64_t range, PhiloxState state)> randint;
}  // namespace kernels

Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
// [start, end) in steps of `step`, as in torch.arange; the one-argument form counts from 0.
// Like every factory it makes float32 unless told otherwise: ember::arange(5, kInt64).
Tensor arange(double end, TensorOptions options = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});

// Uniform on [0, 1), standard normal, and integers uniform on [low, high). Reproducible under
// manual_seed.
Tensor rand(const Shape& shape, TensorOptions options = {});
Tensor randn(const Shape& shape, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = kInt64);

Tensor empty_like(const Tensor& other);
Tensor zeros_like(const Tensor& other);
Tensor ones_like(const Tensor& other);
Tensor full_like(const Tensor& other, double value);
Tensor rand_like(const Tensor& other);
Tensor randn_like(const Tensor& other);

// A 0-d tensor holding `value`.
Tensor scalar_tensor(double value, TensorOptions options = {});

// An int64 tensor of `shape` filled with `value`, exactly: full and scalar_tensor take the value
// as a double, which holds integers exactly only up to 2^53. For counters, ids and indices.
// options' dtype must be int64 (its default here).
Tensor full_int64(const Shape& shape, int64_t value, TensorOptions options = TensorOptions(kInt64));

// A tensor from C++ values and a shape (the element count must match). The dtype is T's
// (float -> float32, double -> float64, int64_t/int -> int64, bool -> bool) unless options
// names another, in which case the values are converted.
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, TensorOptions options);
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape);
template <class T>
Tensor tensor(std::initializer_list<T> values, const Shape& shape) {
  return tensor(std::vector<T>(values), shape);
}
template <class T>
Tensor tensor(std::initializer_list<T> values, const Shape& shape, TensorOptions options) {
  return tensor(std::vector<T>(values), shape, options);
}
// A 1-D tensor from values.
template <class T>
Tensor tensor(std::initializer_list<T> values) {
  return tensor(std::vector<T>(values), Shape{static_cast<int64_t>(values.size())});
}

}  // namespace ember
