// Integer arithmetic that wraps around past the type's range, as PyTorch's int64 tensors do:
// the largest int64 plus one is the smallest. C++ leaves signed overflow undefined (the
// sanitizer build stops on it, and an optimiser may assume it never happens), so the kernels add,
// subtract, multiply and negate signed integers in the unsigned type of the same width, where
// arithmetic is modulo 2^64, and convert back, which C++20 defines as two's complement. On
// floating point types these are the plain operators: a float loop compiles as one with + and *.
#pragma once

#include <type_traits>

namespace ember::cpu {

template <class C>
inline constexpr bool is_signed_integer = std::is_integral_v<C> && std::is_signed_v<C>;

// The type in which a kernel accumulates a running integer total that may wrap: unsigned for
// the signed integers, C itself for everything else.
template <class C>
struct wrapping_type {
  using type = C;
};
template <class C>
  requires is_signed_integer<C>
struct wrapping_type<C> {
  using type = std::make_unsigned_t<C>;
};
template <class C>
using wrapping_t = typename wrapping_type<C>::type;

template <class C>
constexpr C wrapping_add(C x, C y) {
  if constexpr (is_signed_integer<C>) return static_cast<C>(wrapping_t<C>(x) + wrapping_t<C>(y));
  else return x + y;
}

template <class C>
constexpr C wrapping_sub(C x, C y) {
  if constexpr (is_signed_integer<C>) return static_cast<C>(wrapping_t<C>(x) - wrapping_t<C>(y));
  else return x - y;
}

template <class C>
constexpr C wrapping_mul(C x, C y) {
  if constexpr (is_signed_integer<C>) return static_cast<C>(wrapping_t<C>(x) * wrapping_t<C>(y));
  else return x * y;
}

// -x; for a float, -0.0 stays distinct from 0 - 0.0.
template <class C>
constexpr C wrapping_neg(C x) {
  if constexpr (is_signed_integer<C>) return static_cast<C>(-wrapping_t<C>(x));
  else return -x;
}

}  // namespace ember::cpu
