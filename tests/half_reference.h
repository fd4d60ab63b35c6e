// Checking a 16-bit op against float32: the op on bfloat16 or float16 inputs must give the
// float32 op on the same (already rounded) inputs, rounded to the 16-bit format, because ember
// computes 16-bit elements in float32 and rounds once, where it stores the result.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "helpers.h"

namespace ember::testing {

// The 16-bit formats every test runs over.
inline const std::vector<DType> kHalfDTypes = {kBFloat16, kFloat16};

// The format's unit roundoff u: one rounding to the nearest value is off by at most u times
// the value (2^-8 for bfloat16's 8 significant bits, 2^-11 for float16's 11). A step between
// neighbouring values is 2u relative.
inline double unit_roundoff(DType dtype) { return dtype == kBFloat16 ? 0x1p-8 : 0x1p-11; }

// Random normal values already representable in `dtype`, as a float32 tensor: the reference
// computes on exactly what the 16-bit op sees.
inline Tensor representable_randn(const Shape& shape, DType dtype, double scale = 1.0) {
  return mul(randn(shape, kFloat32), scale).to(dtype).to(kFloat32);
}

// Checks that `actual` (16-bit) is `reference` (float32) rounded to actual's dtype, to within
// `units` unit roundoffs of the larger of |expected| and `scale`: 0 units where both compute
// the same float32 values and round once; more where the 16-bit op rounds intermediate results
// (a backward composed of several 16-bit ops), `scale` then being the size of those
// intermediates. NaN must meet NaN, and infinity the same infinity.
inline void check_rounded(const Tensor& actual, const Tensor& reference, double units = 0, double scale = 0) {
  REQUIRE(actual.defined());
  REQUIRE(reference.defined());
  REQUIRE(is_16_bit_floating_point(actual.dtype()));
  REQUIRE(reference.dtype() == kFloat32);
  REQUIRE_MESSAGE(actual.sizes() == reference.sizes(),
                  "shape " << shape_str(actual.sizes()) << " != " << shape_str(reference.sizes()));
  const double u = unit_roundoff(actual.dtype());
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = reference.to(actual.dtype()).to_vector<double>();
  int mismatches = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(e[i]) ? std::isnan(a[i]) : a[i] == e[i]) continue;
    const double allowed = units * u * std::max(std::abs(e[i]), scale);
    if (std::isfinite(e[i]) && std::abs(a[i] - e[i]) <= allowed) continue;
    if (++mismatches <= 5) {
      FAIL_CHECK(dtype_name(actual.dtype()) << " element " << i << ": " << a[i] << ", expected " << e[i]
                                            << " (float32 " << reference.to_vector<double>()[i] << ")");
    }
  }
  CHECK(mismatches == 0);
}

// The gradient of sum(f(x) * weight) with respect to x, computed in x's dtype: the backward of f
// with an upstream gradient (weight) that is not all ones.
inline Tensor gradient_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, const Tensor& weight) {
  Tensor input = x.detach();
  input.requires_grad_(true);
  sum(mul(f(input), weight)).backward();
  return input.grad();
}

// Checks f's backward in `dtype` against float32: both run on the same representable inputs
// and upstream gradient. The 16-bit backward is a composition of 16-bit ops, each rounding
// once, so it may be off by `units` unit roundoffs of the gradient's largest magnitude.
inline void check_gradient_rounded(const std::function<Tensor(const Tensor&)>& f, const Tensor& x32,
                                   const Tensor& weight32, DType dtype, double units) {
  const Tensor expected = gradient_of(f, x32, weight32);
  const Tensor actual = gradient_of(f, x32.to(dtype), weight32.to(dtype));
  REQUIRE(actual.dtype() == dtype);
  check_rounded(actual, expected, units, max_abs(expected));
}

}  // namespace ember::testing
