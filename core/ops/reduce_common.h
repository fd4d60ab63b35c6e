// What the reductions of core/ops/reduce_*.cpp share: the count and list of the reduced dims,
// a result brought back to keepdim form, and the checks of their input.
//
// Every reduction's backward is written with differentiable ops (expand, mul, eq, exp...), not a
// kernel: under create_graph it records by itself, so no reduction needs a second-order path of
// its own. The chosen-element masks of max/min/amax are constants, as their second derivative is
// zero almost everywhere.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/ops/views.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace ember::reduction {

// The dims a mask covers, as a dims list (what sum and mean take).
inline Shape masked_dims(const std::vector<bool>& mask) {
  Shape dims;
  for (size_t d = 0; d < mask.size(); ++d) {
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  }
  return dims;
}

// How many elements of x each output combines.
inline int64_t reduced_count(const Tensor& x, const std::vector<bool>& mask) {
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d) count *= mask[d] ? x.sizes()[d] : 1;
  return count;
}

// A reduced tensor (keepdim or not) reshaped to keepdim form, so it broadcasts against x.
inline Tensor keepdim_form(const Tensor& reduced, const Shape& input_shape, const std::vector<bool>& mask) {
  return reshape(reduced, reduced_shape(input_shape, mask, /*keepdim=*/true));
}

// The gradient of a reduction, broadcast back over the reduced dims.
inline Tensor expand_reduced(const Tensor& grad, const Shape& input_shape, const std::vector<bool>& mask) {
  return expand(keepdim_form(grad, input_shape, mask), input_shape);
}

inline void check_defined_numeric(const Tensor& x, const char* op) {
  EMBER_CHECK(x.defined(), "{}: tensor is undefined", op);
  EMBER_CHECK(x.dtype() != kBool, "{}: not defined for bool tensors (convert with to(kInt64))", op);
}

inline void check_defined_floating(const Tensor& x, const char* op) {
  EMBER_CHECK(x.defined(), "{}: tensor is undefined", op);
  EMBER_CHECK(is_floating_point(x.dtype()), "{}: expected a floating point tensor, got {}", op, x.dtype());
}

}  // namespace ember::reduction
