// What an absent clamp bound stands for, shared by the CPU and CUDA clamp kernels.
#pragma once

#include <limits>

namespace ember {

// The bounds of an absent min or max in compute type C: infinite where C has infinities, so
// that they pass unchanged (C's largest would turn inf into 3.4e38), C's extremes otherwise.
template <class C>
constexpr C absent_lower_bound() {
  return std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest();
}
template <class C>
constexpr C absent_upper_bound() {
  return std::numeric_limits<C>::has_infinity ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max();
}

}  // namespace ember
