// bfloat16 and float16 (core/half.h) against references written independently here: each
// format's values decoded from their fields with ldexp, and float -> 16-bit rounding found by
// searching the sorted list of every finite 16-bit value for the nearest, ties to the even
// pattern. Then 16-bit tensors: conversions both ways (from a double rounded once), printing,
// item(), fills, the data movement ops, and the error for mixed dtypes. The ops' arithmetic on
// them is tested in test_half_elementwise, test_half_reduce and test_half_nn_ops.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// The value of a 16-bit pattern with `exponent_bits` and `mantissa_bits` fields (IEEE layout),
// from the fields alone.
double decode(uint16_t bits, int exponent_bits, int mantissa_bits) {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const int mantissa = bits & ((1 << mantissa_bits) - 1);
  const double sign = (bits & 0x8000) != 0 ? -1.0 : 1.0;
  if (exponent == (1 << exponent_bits) - 1) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias - mantissa_bits);
  return sign * std::ldexp((1 << mantissa_bits) + mantissa, exponent - bias - mantissa_bits);
}

struct Format {
  int exponent_bits, mantissa_bits;
  uint16_t (*from_float)(float);
  float (*to_float)(uint16_t);
};

const Format kBFloat16Format{8, 7, [](float v) { return BFloat16(v).bits; },
                             [](uint16_t b) { return static_cast<float>(BFloat16::from_bits(b)); }};
const Format kFloat16Format{5, 10, [](float v) { return Float16(v).bits; },
                            [](uint16_t b) { return static_cast<float>(Float16::from_bits(b)); }};

// Every finite non-negative value of a format with its pattern, sorted.
std::vector<std::pair<double, uint16_t>> finite_values(const Format& format) {
  std::vector<std::pair<double, uint16_t>> values;
  for (uint32_t bits = 0; bits < 0x8000; ++bits) {
    const double value = decode(static_cast<uint16_t>(bits), format.exponent_bits, format.mantissa_bits);
    if (std::isfinite(value)) values.emplace_back(value, static_cast<uint16_t>(bits));
  }
  std::sort(values.begin(), values.end());
  return values;
}

// The pattern IEEE round-to-nearest-even gives `value` (finite): the nearest finite value, the
// even pattern on a tie, infinity from half an ulp past the largest finite value.
uint16_t nearest_even(const std::vector<std::pair<double, uint16_t>>& values, double value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(value);
  const double largest = values.back().first, ulp = largest - values[values.size() - 2].first;
  if (magnitude >= largest + ulp / 2) {  // a tie with 2^emax rounds to it: the even pattern, infinity
    const uint16_t infinity = static_cast<uint16_t>(values.back().second + 1);
    return sign | infinity;
  }
  auto above = std::lower_bound(values.begin(), values.end(), std::make_pair(magnitude, uint16_t{0}));
  if (above == values.end()) return sign | values.back().second;
  if (above->first == magnitude || above == values.begin()) return sign | above->second;
  const auto below = std::prev(above);
  const double up = above->first - magnitude, down = magnitude - below->first;
  if (up < down) return sign | above->second;
  if (down < up) return sign | below->second;
  return sign | ((below->second & 1) == 0 ? below->second : above->second);
}

void check_format(const Format& format) {
  // Every pattern converts to float exactly.
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const double expected = decode(static_cast<uint16_t>(bits), format.exponent_bits, format.mantissa_bits);
    const float actual = format.to_float(static_cast<uint16_t>(bits));
    if (std::isnan(expected)) {
      CHECK(std::isnan(actual));
    } else {
      CHECK(static_cast<double>(actual) == expected);
      CHECK(std::signbit(actual) == std::signbit(expected));
    }
  }
  // float -> 16 bits: every value, the ties half-way between neighbours (to even), a float ulp
  // either side of each tie, and values past the largest and below the smallest.
  const std::vector<std::pair<double, uint16_t>> values = finite_values(format);
  std::vector<float> probes;
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const float value = static_cast<float>(values[i].first);
    const float tie = static_cast<float>((values[i].first + values[i + 1].first) / 2);
    REQUIRE(static_cast<double>(tie) == (values[i].first + values[i + 1].first) / 2);  // exact in float
    for (const float probe : {value, tie, std::nextafter(tie, 0.0f), std::nextafter(tie, INFINITY)}) {
      probes.push_back(probe);
      probes.push_back(-probe);
    }
  }
  const double largest = values.back().first;
  for (const double beyond : {largest * 1.0001, largest * 2, 1e30, 3.0e38}) probes.push_back(static_cast<float>(beyond));
  probes.push_back(std::numeric_limits<float>::denorm_min());
  probes.push_back(std::numeric_limits<float>::min());
  int mismatches = 0;
  for (const float probe : probes) {
    if (format.from_float(probe) != nearest_even(values, probe) && ++mismatches <= 5) {
      FAIL_CHECK("rounding " << probe << " gives pattern " << format.from_float(probe) << ", expected "
                             << nearest_even(values, probe));
    }
  }
  CHECK(mismatches == 0);
  // Infinities stay infinite, NaN stays NaN (quiet), and the sign of zero is kept.
  CHECK(std::isinf(format.to_float(format.from_float(INFINITY))));
  CHECK(format.to_float(format.from_float(-INFINITY)) < 0);
  CHECK(std::isnan(format.to_float(format.from_float(std::nanf("")))));
  CHECK(std::isnan(format.to_float(format.from_float(-std::nanf("")))));
  CHECK(std::signbit(format.to_float(format.from_float(-0.0f))));
}

}  // namespace

TEST_CASE("bfloat16: exact to float, round-to-nearest-even from float, inf, NaN and subnormals") {
  check_format(kBFloat16Format);
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(BFloat16(1.00390625f).bits == 0x3f80);  // 1 + 2^-8: half-way between 1 and 1 + 2^-7, to even
  CHECK(BFloat16(1.01171875f).bits == 0x3f82);  // 1 + 3 * 2^-8: half-way, to even, upwards
}

TEST_CASE("float16: exact to float, round-to-nearest-even from float, overflow, inf, NaN and subnormals") {
  check_format(kFloat16Format);
  CHECK(Float16(65504.0f).bits == 0x7bff);
  CHECK(Float16(65519.99f).bits == 0x7bff);
  CHECK(Float16(65520.0f).bits == 0x7c00);  // half-way to 2^16: to even, which is infinity
  CHECK(Float16(0x1p-24f).bits == 0x0001);  // the smallest subnormal
  CHECK(Float16(0x1p-25f).bits == 0x0000);  // half of it: a tie, to even (zero)
  CHECK(Float16(0x1.8p-24f).bits == 0x0002);  // 1.5 units: a tie, to even (2)
}

TEST_CASE("16-bit tensors: conversions both ways, item, printing and fills") {
  const Tensor x = tensor<float>({1.0f, -2.5f, 3.140625f, 1e-3f, 70000.0f}, {5});
  const Tensor as_bfloat16 = x.to(kBFloat16);
  const Tensor as_float16 = x.to(kFloat16);
  CHECK(as_bfloat16.dtype() == kBFloat16);
  CHECK(element_size(as_bfloat16.dtype()) == 2);
  CHECK(as_float16.dtype() == kFloat16);
  // Each value rounds once, as its scalar conversion does; float16 overflows past 65504.
  std::vector<float> expected_bfloat16, expected_float16;
  for (const float value : x.to_vector<float>()) {
    expected_bfloat16.push_back(static_cast<float>(BFloat16(value)));
    expected_float16.push_back(static_cast<float>(Float16(value)));
  }
  CHECK(as_bfloat16.to(kFloat32).to_vector<float>() == expected_bfloat16);
  CHECK(as_float16.to_vector<float>() == expected_float16);
  CHECK(std::isinf(as_float16.to_vector<float>()[4]));
  // Representable values survive the round trip exactly, through every other dtype too.
  const Tensor exact = tensor<float>({0.5f, -4.0f, 96.0f}, {3});
  for (const DType via : {kFloat64, kFloat16, kBFloat16}) {
    CHECK(exact.to(kBFloat16).to(via).to(kFloat32).to_vector<float>() == exact.to_vector<float>());
  }
  CHECK(exact.to(kFloat16).to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, -4, 96});
  CHECK(tensor<int64_t>({3, -7}, {2}).to(kBFloat16).to_vector<float>() == std::vector<float>{3.0f, -7.0f});
  CHECK(as_bfloat16.slice(0, 2, 3).item<double>() == 3.140625);
  CHECK(fmt::format("{}", exact.to(kBFloat16)) == "tensor([ 0.5000, -4.0000, 96.0000], shape=[3], dtype=bfloat16)");
  CHECK(full({2}, 0.1, kFloat16).to_vector<float>() == std::vector<float>(2, static_cast<float>(Float16(0.1f))));
  CHECK(zeros({3}, kBFloat16).to_vector<float>() == std::vector<float>(3, 0.0f));
}

TEST_CASE("16-bit tensors: the ops that move data take them, and mixing dtypes names both") {
  const Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}).to(kBFloat16);
  CHECK(x.t().contiguous().to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(index_select(x, 1, tensor<int64_t>({2, 0}, {2})).to_vector<float>() == std::vector<float>{3, 1, 6, 4});
  CHECK(cat({x, x}, 0).sizes() == Shape{4, 3});
  CHECK(gather(x, 1, tensor<int64_t>({1, 1, 0, 2}, {2, 2})).to_vector<float>() == std::vector<float>{2, 2, 4, 6});
  const Tensor mask = tensor<bool>({true, false, true, false, true, false}, {2, 3});
  CHECK(where(mask, x, zeros_like(x)).to_vector<float>() == std::vector<float>{1, 0, 3, 0, 5, 0});
  // Outside an autocast scope nothing converts silently: a 16-bit operand with a float32 one
  // is an error that names both dtypes.
  CHECK_THROWS_WITH_ALL(add(x, x.to(kFloat32)), "add", "bfloat16", "float32");
  CHECK_THROWS_WITH_ALL(matmul(x.to(kFloat16), x.t()), "matmul", "float16", "bfloat16");
}

TEST_CASE("16-bit values from a double or an integer round once, not through the nearest float") {
  // 1 + 2^-8 is half-way between the bfloat16 neighbours 1 and 1 + 2^-7 (and 1 + 2^-11 between
  // float16's 1 and 1 + 2^-10). A double just above the half-way point rounds up; rounded to
  // the nearest float first it would become the half-way point itself and round to even, down.
  const double above_bfloat16_tie = 1.0 + 0x1p-8 + 0x1p-40, above_float16_tie = 1.0 + 0x1p-11 + 0x1p-40;
  CHECK(static_cast<float>(BFloat16(above_bfloat16_tie)) == 1.0f + 0x1p-7f);
  CHECK(static_cast<float>(Float16(above_float16_tie)) == 1.0f + 0x1p-10f);
  CHECK(static_cast<float>(BFloat16(-above_bfloat16_tie)) == -(1.0f + 0x1p-7f));
  CHECK(static_cast<float>(BFloat16(1.0 + 0x1p-8 - 0x1p-40)) == 1.0f);  // just below: down
  CHECK(static_cast<float>(BFloat16(1.0 + 0x1p-8)) == 1.0f);            // the tie itself: to even
  // Every path from a double agrees: conversion, fill, and the integers (257 is a tie too).
  CHECK(tensor<double>({above_bfloat16_tie}, {1}).to(kBFloat16).to_vector<float>()[0] == 1.0f + 0x1p-7f);
  CHECK(full({1}, above_float16_tie, kFloat16).to_vector<float>()[0] == 1.0f + 0x1p-10f);
  CHECK(static_cast<float>(BFloat16(int64_t{257})) == 256.0f);
  CHECK(static_cast<float>(BFloat16(int64_t{259})) == 260.0f);
}
