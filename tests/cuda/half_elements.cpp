// The 16-bit element types of the CUDA kernels (cuda/common/half_elements.h, cuda/ops/device_elements.h),
// checked on the CPU wherever the CUDA backend is built: CUDA's conversions are host functions
// too, so the bits a kernel reads and writes through __nv_bfloat16 and __half can be compared
// with core/half.h's without a GPU. Every 16-bit pattern widens to the same float, and floats
// around every rounding boundary round to the same 16 bits, so a 16-bit tensor means the same
// values on both devices and a kernel's stores round as the CPU's do.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "core/ops/factory.h"
#include "core/tensor.h"
#include "cuda/ops/device_elements.h"

using namespace ember;
using cuda::device_element_t;

namespace {

uint16_t bits_of(__nv_bfloat16 value) { return std::bit_cast<uint16_t>(value); }
uint16_t bits_of(__half value) { return std::bit_cast<uint16_t>(value); }

template <class T>
T device_from_bits(uint16_t bits) {
  return std::bit_cast<T>(bits);
}

// Equal bits, or both NaN (the formats' NaN payloads are not part of what is compared).
bool same_float(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (a != a && b != b);
}

template <class Host, class Device>
void check_every_pattern_widens_alike() {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const float device = cuda::to_compute(device_from_bits<Device>(static_cast<uint16_t>(bits)));
    const float host = Host::from_bits(static_cast<uint16_t>(bits));
    if (!same_float(device, host))
      FAIL_CHECK("pattern 0x" << std::hex << bits << ": CUDA " << device << ", ember " << host);
  }
}

// The floats that decide rounding: for every 16-bit value, its neighbours in float and the
// half-way points to the next value up (ties), and a spread of random bit patterns.
std::vector<float> rounding_probes() {
  std::vector<float> probes;
  for (uint32_t high = 0; high <= 0xffffu; ++high) {
    const uint32_t base = high << 16;
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      probes.push_back(std::bit_cast<float>(base | low));
  }
  // float16's ties sit 13 bits down: 0x1000 past a multiple of 0x2000 (normals), and subnormal
  // ties below 2^-14 come from the random patterns and the whole-range sweep.
  for (uint32_t bits = 0; bits < 0x80000000u; bits += 0x1000u) {
    probes.push_back(std::bit_cast<float>(bits));
    probes.push_back(std::bit_cast<float>(bits | 0x80000000u));
  }
  std::mt19937 random(15);
  for (int i = 0; i < 1 << 20; ++i) probes.push_back(std::bit_cast<float>(static_cast<uint32_t>(random())));
  for (float special : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f,
                        0x1.8p-25f, 0x1p-14f, 3.3895314e38f, 3.4028235e38f})
    probes.push_back(special);
  return probes;
}

template <class Host, class Device>
void check_rounding_agrees(const std::vector<float>& probes) {
  int mismatches = 0;
  for (const float value : probes) {
    const Device device = cuda::round_to<Device>(value);
    const Host host(value);
    const bool both_nan = value != value && cuda::to_compute(device) != cuda::to_compute(device) &&
                          static_cast<float>(host) != static_cast<float>(host);
    if (bits_of(device) != host.bits && !both_nan && ++mismatches <= 10)
      FAIL_CHECK("float bits 0x" << std::hex << std::bit_cast<uint32_t>(value) << ": CUDA 0x" << bits_of(device)
                                 << ", ember 0x" << host.bits);
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("ember's 16-bit types map to CUDA's, and each compute type to core's") {
  static_assert(std::is_same_v<device_element_t<BFloat16>, __nv_bfloat16>);
  static_assert(std::is_same_v<device_element_t<Float16>, __half>);
  static_assert(std::is_same_v<device_element_t<float>, float> && std::is_same_v<device_element_t<double>, double>);
  static_assert(std::is_same_v<device_element_t<int64_t>, int64_t> && std::is_same_v<device_element_t<bool>, bool>);
  static_assert(std::is_same_v<cuda::compute_t<device_element_t<BFloat16>>, compute_type<BFloat16>>);
  static_assert(std::is_same_v<cuda::compute_t<device_element_t<Float16>>, compute_type<Float16>>);
  static_assert(std::is_same_v<cuda::compute_t<double>, compute_type<double>>);
  static_assert(std::is_same_v<cuda::compute_t<int64_t>, int64_t>);
  CHECK(cuda::is_16_bit_element<__half>);
  CHECK_FALSE(cuda::is_16_bit_element<float>);
}

TEST_CASE("every bfloat16 and float16 bit pattern means the same float to CUDA and to ember") {
  check_every_pattern_widens_alike<BFloat16, __nv_bfloat16>();
  check_every_pattern_widens_alike<Float16, __half>();
}

TEST_CASE("CUDA's round-to-nearest-even stores the bits core/half.h rounds to") {
  const std::vector<float> probes = rounding_probes();
  check_rounding_agrees<BFloat16, __nv_bfloat16>(probes);
  check_rounding_agrees<Float16, __half>(probes);
}

namespace {

// The double rounded once to Host: rounded to float *to odd* first (towards zero, the last bit
// set when anything was dropped), which keeps enough to round correctly again.
template <class Host>
Host correctly_rounded(double value) {
  float nearest = static_cast<float>(value);
  if (std::isfinite(nearest) && static_cast<double>(nearest) != value && (std::bit_cast<uint32_t>(nearest) & 1u) == 0)
    nearest = std::nextafter(nearest, value > nearest ? INFINITY : -INFINITY);
  return Host(nearest);
}

template <class Host, class Device>
void check_double_rounding(const std::vector<double>& values) {
  int mismatches = 0;
  for (const double value : values) {
    const uint16_t device = bits_of(cuda::round_to<Device>(value));
    if (device != correctly_rounded<Host>(value).bits && ++mismatches <= 10)
      FAIL_CHECK("double " << value << ": CUDA 0x" << std::hex << device << ", ember 0x"
                           << correctly_rounded<Host>(value).bits);
  }
  CHECK(mismatches == 0);
}

// The CPU's rule for a uniform draw: to nearest, then one step down if that went up.
template <class Host>
Host rounded_down(float value) {
  Host rounded(value);
  if (static_cast<float>(rounded) > value) rounded = Host::from_bits(static_cast<uint16_t>(rounded.bits - 1));
  return rounded;
}

}  // namespace

TEST_CASE("doubles and integers round once to 16 bits, as core/half.h rounds them, not by way of float") {
  std::vector<double> values = {1.0 + 0x1p-8 + 0x1p-30, 1.0 + 0x1p-8, 1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-11,
                                2049.0, 16777217.0, 123456789.0, -0.1, 1e-300, 65520.0, 65519.0, 1e300, -0.0};
  std::mt19937_64 random(15);
  for (int i = 0; i < 1 << 18; ++i) {
    // Spread over the 16-bit ranges, with bits below float32's mantissa set.
    const double scale = std::ldexp(1.0, static_cast<int>(random() % 60) - 30);
    values.push_back(scale * (static_cast<double>(random()) / 0x1p64 - 0.5));
    values.push_back(static_cast<double>(static_cast<int64_t>(random() % (1ull << 40)) - (int64_t{1} << 39)));
  }
  check_double_rounding<BFloat16, __nv_bfloat16>(values);
  check_double_rounding<Float16, __half>(values);
  // 1 + 2^-8 + 2^-30 lies above the tie between 1 and 1 + 2^-7: it rounds up, where the float
  // it rounds to (the tie itself, the 2^-30 dropped) would round to even, down to 1.
  const double above_tie = 1.0 + 0x1p-8 + 0x1p-30;
  CHECK(bits_of(cuda::round_to<__nv_bfloat16>(above_tie)) == 0x3f81u);
  CHECK(bits_of(cuda::round_to<__nv_bfloat16>(static_cast<float>(above_tie))) == 0x3f80u);
  // Integers go through double: 2049 is a float16 tie (to 2048), 2051 is not (to 2052), and
  // 2^24 + 2^16 + 1, which float rounds to the bfloat16 tie 2^24 + 2^16 (then to even, 2^24),
  // rounds up to 2^24 + 2^17.
  CHECK(bits_of(cuda::round_to<__half>(int64_t{2049})) == Float16(2048.0f).bits);
  CHECK(bits_of(cuda::round_to<__half>(int64_t{2051})) == Float16(2052.0f).bits);
  CHECK(bits_of(cuda::round_to<__nv_bfloat16>(int64_t{(1 << 24) + (1 << 16) + 1})) ==
        BFloat16(static_cast<float>((1 << 24) + (1 << 17))).bits);
  CHECK(bits_of(cuda::round_to<__half>(true)) == Float16(1.0f).bits);
  // Every other store is the static_cast the float32 kernels always made.
  CHECK(cuda::round_to<float>(0.1) == static_cast<float>(0.1));
  CHECK(cuda::round_to<int64_t>(2.75) == 2);
  CHECK(cuda::round_to<bool>(0.5f));
  CHECK(cuda::to_compute(2.5) == 2.5);
}

TEST_CASE("uniform draws round towards zero to 16 bits, as on the CPU, and stay below 1") {
  std::mt19937 random(15);
  std::vector<float> draws = {0.0f, 0x1p-30f, 0x1p-20f, 0.5f, std::nextafter(1.0f, 0.0f), 1.0f - 0x1p-10f};
  for (int i = 0; i < 1 << 20; ++i) draws.push_back(static_cast<float>(random() >> 8) * 0x1p-24f);
  int mismatches = 0;
  for (const float draw : draws) {
    const __nv_bfloat16 b = cuda::round_toward_zero<__nv_bfloat16>(draw);
    const __half h = cuda::round_toward_zero<__half>(draw);
    if (bits_of(b) != rounded_down<BFloat16>(draw).bits || bits_of(h) != rounded_down<Float16>(draw).bits) ++mismatches;
    if (cuda::to_compute(b) >= 1.0f || cuda::to_compute(h) >= 1.0f) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("a 16-bit tensor's data is read through CUDA's type without conversion") {
  const std::vector<float> values = {1.0f, -2.5f, 0x1p-20f, 65504.0f, 3.1415926f};
  const Tensor t = tensor<float>(values, {5}).to(kBFloat16);
  const __nv_bfloat16* device_view = cuda::device_data<BFloat16>(t);
  for (int64_t i = 0; i < 5; ++i)
    CHECK(bits_of(device_view[i]) == t.data_ptr<BFloat16>()[i].bits);
  const Tensor h = tensor<float>(values, {5}).to(kFloat16);
  const __half* half_view = cuda::device_data<Float16>(h);
  for (int64_t i = 0; i < 5; ++i) CHECK(cuda::to_compute(half_view[i]) == static_cast<float>(h.data_ptr<Float16>()[i]));
  CHECK_THROWS_WITH(cuda::device_data<Float16>(t), doctest::Contains("bfloat16"));
}
