// The one float-to-integer conversion of ember's kernels. C++'s static_cast from a floating
// value to an integer is undefined behaviour for NaN, inf and values outside the integer's range
// (the sanitizer build aborts on it), and the GPU's conversion saturates where x86's gives the
// smallest integer. This gives, on every device, what PyTorch gives on x86 CPUs: the value
// truncated toward zero when it fits, the integer's smallest value otherwise.
// Plain C++17 and constexpr, so nvcc's device code calls it too (--expt-relaxed-constexpr).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace ember {

template <class Int, class Float>
constexpr Int float_to_int(Float value) {
  static_assert(std::is_integral_v<Int> && std::is_signed_v<Int> && std::is_floating_point_v<Float>,
                "float_to_int converts a floating value to a signed integer");
  // 2^(digits) is exact in every floating type that can hold the integer's range; the
  // comparisons are false for NaN.
  constexpr Float bound = static_cast<Float>(static_cast<double>(std::numeric_limits<Int>::max()) + 1.0);
  if (value >= -bound && value < bound) return static_cast<Int>(value);
  return std::numeric_limits<Int>::min();
}

}  // namespace ember
