// The 16-bit floating point formats: bfloat16 (float32's 8-bit exponent, 7 mantissa bits) and
// float16 (IEEE binary16: 5-bit exponent, 10 mantissa bits), as value types that tensors store.
// Conversions from float round to the nearest representable value, ties to the one whose last
// mantissa bit is 0 (round-to-nearest-even, as every GPU and PyTorch do); NaN stays NaN, values
// past the largest finite one become infinity, and float16 keeps the subnormals below 2^-14.
// Conversions to float are exact. Arithmetic is done in float: a 16-bit value converts to float
// implicitly, and back only explicitly, so each result is rounded once, where it is stored.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>

namespace ember {

namespace half_bits {

// float32 -> bfloat16: float32's top 16 bits, rounded on the 16 dropped.
constexpr uint16_t from_float_to_bfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // a quiet NaN
  // Adding 0x7fff rounds half-way cases down; the kept part's lowest bit tips them to even. A
  // carry out of the mantissa moves the exponent up, to infinity past the largest finite value.
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

constexpr float bfloat16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// float32 -> float16.
constexpr uint16_t from_float_to_float16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: quiet, with the top of its payload
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 = 0x477ff000 is half-way between float16's largest finite value, 65504, and 2^16:
  // from there up (infinity included) the nearest-even value is infinity.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal float16, a multiple of 2^-24
    const uint32_t exponent = magnitude >> 23;
    if (exponent < 102) return sign;  // below 2^-25: nearer to 0 than to 2^-24
    // value = significand * 2^(exponent - 150); in units of 2^-24 that is significand >> shift.
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14 to 24
    const uint32_t halfway = 1u << (shift - 1), rest = significand & ((1u << shift) - 1);
    uint32_t units = significand >> shift;
    if (rest > halfway || (rest == halfway && (units & 1u) != 0)) ++units;  // to 2^-14 at the top: a normal
    return static_cast<uint16_t>(sign | units);
  }
  // Normal: the exponent's bias goes from 127 to 15, and the 13 dropped mantissa bits round as
  // for bfloat16 (a carry moves the exponent up).
  const uint32_t rebased = magnitude - ((127u - 15u) << 23);
  const uint32_t rounded = rebased + 0x0fffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

constexpr float float16_to_float(uint16_t bits) {
  // Branch-free, so that loops over float16 values vectorise: the exponent and mantissa moved
  // into float32's fields are a float32 2^-112 times the value (exactly: a float16 subnormal
  // lands on a float32 subnormal), which the product by 2^112 rescales; infinity and NaN (float16
  // exponent all ones) take float32's all-ones exponent with the same payload.
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t magnitude = static_cast<uint32_t>(bits & 0x7fffu) << 13;
  const uint32_t finite = std::bit_cast<uint32_t>(std::bit_cast<float>(magnitude) * 0x1p112f);
  const uint32_t special = magnitude | 0x7f800000u;
  return std::bit_cast<float>(sign | (magnitude >= (0x7c00u << 13) ? special : finite));
}

// A double as a float rounded *to odd*: to the nearest float, then, when that dropped something
// and came out even, to its neighbour towards the double, whose last bit is 1. A double rounded
// to the nearest float first could land exactly half-way between two 16-bit values that the
// double itself was not half-way between, and rounding that float would then break the tie the
// wrong way; the odd last bit records that the float is inexact, so rounding it to 16 bits lands
// where rounding the double directly would (float keeps more than 2 bits beyond either format).
constexpr float to_float_rounded_to_odd(double value) {
  const float nearest = static_cast<float>(value);
  const uint32_t bits = std::bit_cast<uint32_t>(nearest);
  const bool finite = (bits & 0x7f800000u) != 0x7f800000u;
  if (!finite || static_cast<double>(nearest) == value || (bits & 1u) != 0) return nearest;
  // Sign and magnitude: one more in the magnitude's bits moves away from zero.
  const bool value_is_farther_from_zero = (value < 0 ? -value : value) > (nearest < 0 ? -nearest : nearest);
  return std::bit_cast<float>(value_is_farther_from_zero ? bits + 1 : bits - 1);
}

}  // namespace half_bits

struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  constexpr explicit BFloat16(float value) : bits(half_bits::from_float_to_bfloat16(value)) {}
  // From a double or an integer, rounded once (through a float rounded to odd).
  constexpr explicit BFloat16(double value) : BFloat16(half_bits::to_float_rounded_to_odd(value)) {}
  template <std::integral Integer>
  constexpr explicit BFloat16(Integer value) : BFloat16(static_cast<double>(value)) {}
  static constexpr BFloat16 from_bits(uint16_t bits) {
    BFloat16 value;
    value.bits = bits;
    return value;
  }
  constexpr operator float() const { return half_bits::bfloat16_to_float(bits); }  // NOLINT: exact, implicit
};

struct Float16 {
  uint16_t bits = 0;

  Float16() = default;
  constexpr explicit Float16(float value) : bits(half_bits::from_float_to_float16(value)) {}
  // From a double or an integer, rounded once (through a float rounded to odd).
  constexpr explicit Float16(double value) : Float16(half_bits::to_float_rounded_to_odd(value)) {}
  template <std::integral Integer>
  constexpr explicit Float16(Integer value) : Float16(static_cast<double>(value)) {}
  static constexpr Float16 from_bits(uint16_t bits) {
    Float16 value;
    value.bits = bits;
    return value;
  }
  constexpr operator float() const { return half_bits::float16_to_float(bits); }  // NOLINT: exact, implicit
};

static_assert(sizeof(BFloat16) == 2 && sizeof(Float16) == 2, "16-bit tensors are stored 2 bytes an element");

}  // namespace ember
