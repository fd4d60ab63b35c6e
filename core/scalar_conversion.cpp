// The checked conversion of scalars into element types.
#include "core/scalar_conversion.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace ember {
namespace {

// The largest finite value of each floating dtype.
double largest_finite(DType dtype) {
  switch (dtype) {
    case DType::Float32: return std::numeric_limits<float>::max();
    case DType::Float64: return std::numeric_limits<double>::max();
    case DType::BFloat16: return 0x1.FEp127;  // 3.3895e38
    case DType::Float16: return 65504.0;
    default: return 0.0;
  }
}

}  // namespace

bool fits_in(double value, DType dtype) {
  if (dtype == kBool) return true;  // any value is true or false
  if (dtype == kInt64) return value >= -0x1p63 && value < 0x1p63;  // false for NaN
  return !std::isfinite(value) || std::abs(value) <= largest_finite(dtype);
}

void check_fits(double value, DType dtype, std::string_view op) {
  EMBER_CHECK(fits_in(value, dtype), "{}: value {} cannot be converted to {} without overflow", op, value, dtype);
}

void check_storable(double value, DType dtype, std::string_view op) {
  check_fits(value, dtype, op);
  EMBER_CHECK(dtype != kInt64 || value == std::floor(value),
              "{}: value {} is not an integer but the tensor is int64", op, value);
}

}  // namespace ember
