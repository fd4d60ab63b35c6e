// Scalars that the tensor's dtype cannot hold are refused where they enter, by PyTorch's rule
// for a checked conversion: a finite value beyond a floating type's largest is an overflow
// (inf and NaN pass), an integer type takes neither NaN nor inf nor a value outside its range.
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/float_to_int.h"
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
}  // namespace

TEST_CASE("full and fill_ refuse a value the dtype overflows on") {
  CHECK_THROWS_WITH_ALL(full({1}, 1e300), "full", "1e+300", "float32", "overflow");
  CHECK_THROWS_WITH_ALL(full({1}, -1e39, kBFloat16), "full", "bfloat16", "overflow");
  CHECK_THROWS_WITH_ALL(full({1}, 70000.0, kFloat16), "full", "float16", "overflow");
  CHECK_THROWS_WITH_ALL(full({1}, kNaN, kInt64), "full", "int64");
  CHECK_THROWS_WITH_ALL(full({1}, 0x1p63, kInt64), "full", "int64");
  Tensor x = zeros({2});
  CHECK_THROWS_WITH_ALL(x.fill_(1e300), "fill_", "float32", "overflow");
  CHECK_THROWS_WITH_ALL(zeros({2}, kFloat16).fill_(65520.0), "fill_", "float16", "overflow");

  CHECK(std::isinf(full({1}, kInf).item<double>()));
  CHECK(std::isnan(full({1}, kNaN, kFloat16).item<double>()));
  CHECK(full({1}, 1e300, kFloat64).item<double>() == 1e300);
  CHECK(full({1}, 65504.0, kFloat16).item<double>() == 65504.0);
  CHECK(full({1}, 3.0, kBool).item<bool>());
  CHECK(full({1}, -0x1p63, kInt64).item<int64_t>() == kMin64);
}

TEST_CASE("item<T> refuses a value T cannot hold") {
  CHECK_THROWS_WITH_ALL(full({}, 1e10, kInt64).item<int>(), "item", "10000000000", "int");
  CHECK_THROWS_WITH_ALL(full({}, kNaN, kFloat64).item<int64_t>(), "item", "nan", "int64");
  CHECK_THROWS_WITH_ALL(full({}, -kInf).item<int64_t>(), "item", "inf");
  CHECK_THROWS_WITH_ALL(full({}, 1e300, kFloat64).item<float>(), "item", "float", "overflow");
  CHECK_THROWS_WITH_ALL(full({}, 0x1p63, kFloat64).item<int64_t>(), "item", "int64");
  CHECK(tensor(std::vector<int64_t>{kMax64}, {}).item<int64_t>() == kMax64);
  CHECK(full({}, -2147483648.0, kInt64).item<int>() == -2147483648);
  CHECK(full({}, 2.75, kFloat64).item<int>() == 2);
  CHECK(std::isnan(full({}, kNaN, kFloat64).item<float>()));
  CHECK(full({}, 1e10, kInt64).item<double>() == 1e10);
  CHECK(full({}, 1e300, kFloat64).item<bool>());
}

TEST_CASE("arange refuses bounds its dtype cannot hold and lengths past int64") {
  CHECK_THROWS_WITH_ALL(arange(0, 1e30, 1e29, kInt64), "arange", "int64");
  CHECK_THROWS_WITH_ALL(arange(-1e30, 0, 1e29, kInt64), "arange", "int64");
  CHECK_THROWS_WITH_ALL(arange(0, 1e30, 1.0, kFloat64), "arange", "1e+30");
  CHECK_THROWS_WITH_ALL(arange(1e19), "arange");
  CHECK(arange(0, 1e30, 2.5e29, kFloat64).numel() == 4);
  CHECK(arange(0, 9e18, 1e18, kInt64).to_vector<int64_t>().back() == int64_t{8'000'000'000'000'000'000});
}

TEST_CASE("randint draws from the whole int64 range") {
  manual_seed(7);
  const Tensor all = randint(kMin64, kMax64, {4096});
  const std::vector<int64_t> drawn = all.to_vector<int64_t>();
  int negative = 0;
  for (int64_t v : drawn) {
    CHECK(v < kMax64);
    negative += v < 0;
  }
  // Half of the range is negative: a draw confined to [low, low + 2^63) would make them all so.
  CHECK(negative > 1800);
  CHECK(negative < 2300);
  const Tensor top = randint(kMax64 - 2, kMax64, {64});
  for (int64_t v : top.to_vector<int64_t>()) CHECK((v == kMax64 - 2 || v == kMax64 - 1));
}

TEST_CASE("clamp refuses bounds the tensor's dtype cannot hold") {
  const Tensor i = tensor({-5, 0, 5});
  CHECK_THROWS_WITH_ALL(clamp(i, 1e300, std::nullopt), "clamp", "1e+300", "int64");
  CHECK_THROWS_WITH_ALL(clamp(i, std::nullopt, -1e300), "clamp", "int64");
  CHECK_THROWS_WITH_ALL(clamp(i, 0.5, std::nullopt), "clamp", "0.5", "int64");
  CHECK_THROWS_WITH_ALL(clamp(i, kNaN, std::nullopt), "clamp", "NaN");
  CHECK_THROWS_WITH_ALL(clamp(ones({2}), std::nullopt, 1e300), "clamp", "float32", "overflow");
  CHECK(clamp(i, -2.0, 2.0).to_vector<int64_t>() == std::vector<int64_t>{-2, 0, 2});
  CHECK(clamp(i, -0x1p63, std::nullopt).to_vector<int64_t>() == std::vector<int64_t>{-5, 0, 5});
  CHECK(clamp(ones({2}, kFloat64), std::nullopt, 1e300).to_vector<double>() == std::vector<double>{1, 1});
}

TEST_CASE("masked_fill refuses a value the dtype overflows on") {
  const Tensor mask = tensor({true, false});
  CHECK_THROWS_WITH_ALL(masked_fill(zeros({2}), mask, 1e300), "masked_fill", "float32", "overflow");
  CHECK_THROWS_WITH_ALL(masked_fill(zeros({2}, kInt64), mask, 1e19), "masked_fill", "int64");
  CHECK(masked_fill(zeros({2}, kInt64), mask, 7.0).to_vector<int64_t>() == std::vector<int64_t>{7, 0});
}

TEST_CASE("clamp leaves infinities to its bounds and refuses a NaN bound") {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (const DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const Tensor x = tensor({-kInf, -1.0, 1.0, kInf}, {4}).to(dtype);
    CHECK(clamp(x, std::nullopt, std::nullopt).to_vector<double>() == std::vector<double>{-kInf, -1, 1, kInf});
    CHECK(clamp(x, 0.0, std::nullopt).to_vector<double>() == std::vector<double>{0, 0, 1, kInf});
    CHECK(clamp(x, std::nullopt, 0.0).to_vector<double>() == std::vector<double>{-kInf, -1, 0, 0});
    CHECK(clamp(x, -kInf, kInf).to_vector<double>() == std::vector<double>{-kInf, -1, 1, kInf});
    CHECK_THROWS_WITH_ALL(clamp(x, kNaN, std::nullopt), "clamp", "NaN", "min nan");
    CHECK_THROWS_WITH_ALL(clamp(x, 0.0, kNaN), "clamp", "NaN", "max nan");
  }
}

TEST_CASE("arithmetic with a scalar converts it to the tensor's dtype, as PyTorch does") {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  CHECK(mul(ones({2}), 1e300).to_vector<double>() == std::vector<double>{kInf, kInf});
  CHECK(add(ones({1}, kFloat16), 70000.0).to_vector<double>() == std::vector<double>{kInf});
  CHECK(std::isnan(mul(zeros({1}), 1e300).item<double>()));
  CHECK(mul(ones({1}, kFloat64), 1e300).item<double>() == 1e300);
  Tensor x = ones({2});
  x.mul_(1e300);
  CHECK(x.to_vector<double>() == std::vector<double>{kInf, kInf});
  CHECK_THROWS_WITH_ALL(add(tensor({1, 2}), 1e300), "add", "int64");
}

// PyTorch's int64 tensors wrap around past int64's range (two's complement); in C++ a signed
// overflow is undefined behaviour, which the sanitized run of this suite would stop on.
TEST_CASE("int64 arithmetic wraps around past int64's range, as PyTorch's does") {
  const Tensor largest = tensor<int64_t>({kMax64, kMax64}), smallest = tensor<int64_t>({kMin64, kMin64});
  CHECK(add(largest, tensor<int64_t>({1, 2})).to_vector<int64_t>() == std::vector<int64_t>{kMin64, kMin64 + 1});
  CHECK(sub(smallest, tensor<int64_t>({1, 2})).to_vector<int64_t>() == std::vector<int64_t>{kMax64, kMax64 - 1});
  CHECK(mul(largest, tensor<int64_t>({2, -1})).to_vector<int64_t>() == std::vector<int64_t>{-2, kMin64 + 1});
  CHECK(mul(tensor<int64_t>({int64_t{1} << 62}), tensor<int64_t>({4})).item<int64_t>() == 0);
  // The single-element operand takes the hoisted-scalar loop; the scalar overloads go through it.
  CHECK(add(largest, 1.0).to_vector<int64_t>() == std::vector<int64_t>{kMin64, kMin64});
  CHECK(mul(smallest, -1.0).to_vector<int64_t>() == std::vector<int64_t>{kMin64, kMin64});
  Tensor written = largest.clone();
  written.add_(tensor<int64_t>({1, 1}), 3.0);
  CHECK(written.to_vector<int64_t>() == std::vector<int64_t>{kMin64 + 2, kMin64 + 2});
  CHECK(neg(smallest).to_vector<int64_t>() == std::vector<int64_t>{kMin64, kMin64});
  CHECK(abs(smallest).to_vector<int64_t>() == std::vector<int64_t>{kMin64, kMin64});
  CHECK(neg(tensor<int64_t>({kMax64, 0})).to_vector<int64_t>() == std::vector<int64_t>{kMin64 + 1, 0});
  // Sums: the contiguous row loop and the column loop.
  CHECK(sum(tensor<int64_t>({kMax64, 1, 1})).item<int64_t>() == kMin64 + 1);
  CHECK(sum(tensor<int64_t>({kMax64, kMax64, 1, 2}, {2, 2}), {0}).to_vector<int64_t>() ==
        std::vector<int64_t>{kMin64, kMin64 + 1});
  // index_add and scatter_add (the kernels under gather's and index_select's backward).
  Tensor target = tensor<int64_t>({kMax64, 0});
  kernels::index_add[DeviceType::CPU](target, tensor<int64_t>({1, 1}), 0, tensor<int64_t>({0, 0}));
  CHECK(target.to_vector<int64_t>() == std::vector<int64_t>{kMin64 + 1, 0});
  kernels::scatter_add[DeviceType::CPU](target, tensor<int64_t>({-2}), 0, tensor<int64_t>({0}));
  CHECK(target.to_vector<int64_t>() == std::vector<int64_t>{kMax64, 0});
}

TEST_CASE("tensor() refuses values the requested dtype overflows on, as torch.tensor does") {
  CHECK_THROWS_WITH_ALL(tensor<double>({1e300}, {1}, kInt64), "tensor: value 1e+300 cannot be converted to int64");
  CHECK_THROWS_WITH_ALL(tensor<double>({std::nan("")}, {1}, kInt64), "tensor: value nan", "int64");
  CHECK_THROWS_WITH_ALL(tensor<double>({1e300}, {1}, kFloat32), "tensor: value 1e+300", "float32");
  CHECK_THROWS_WITH_ALL(tensor<int64_t>({100000}, {1}, kFloat16), "tensor: value 100000", "float16");
  // What fits converts as before: a fraction is cut toward zero, as in PyTorch.
  CHECK(tensor<double>({-2.5, 3.9, 0x1p62}, {3}, kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{-2, 3, int64_t{1} << 62});
  CHECK(tensor<double>({std::numeric_limits<double>::infinity()}, {1}, kFloat32).item<float>() ==
        std::numeric_limits<float>::infinity());
}

TEST_CASE("converting floating values to int64 is defined for NaN, inf and values out of range") {
  // PyTorch on x86 gives int64's smallest value for each of them; ember gives it on every path
  // (float64, float32 and the 16-bit types), without the undefined cast the sanitizers catch.
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t smallest = std::numeric_limits<int64_t>::min();
  for (const DType dtype : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
    INFO(dtype_name(dtype));
    const Tensor x = tensor<double>({std::nan(""), inf, -inf, 1e30, -1e30, 7.9, -7.9}, {7}).to(dtype);
    const std::vector<int64_t> converted = x.to(kInt64).to_vector<int64_t>();
    for (int i = 0; i < 5; ++i) CHECK(converted[i] == smallest);  // float16 holds 1e30 as inf
    CHECK(converted[5] == 7);
    CHECK(converted[6] == -7);
  }
  // The edges of int64's range: -2^63 fits, 2^63 does not.
  CHECK(tensor<double>({-0x1p63, 0x1p63}, {2}).to(kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{smallest, smallest});
  CHECK(float_to_int<int64_t>(0x1p62) == int64_t{1} << 62);
  CHECK(float_to_int<int64_t>(-0x1p63) == smallest);
  CHECK(float_to_int<int64_t>(0x1p63) == smallest);
  CHECK(float_to_int<int64_t>(-1.5f) == -1);
  static_assert(float_to_int<int64_t>(3.99) == 3);
}
