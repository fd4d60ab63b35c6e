// Shapes whose element count, strides, byte size or end offset do not fit in int64 are refused,
// with the shape in the message, where they enter: factories, expand, view and reshape, narrow,
// cat and the positional encodings' offsets.
#include <cstdint>
#include <limits>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t k2e32 = int64_t{1} << 32;
constexpr int64_t k2e62 = int64_t{1} << 62;
}  // namespace

TEST_CASE("expand to more elements than int64 counts is refused") {
  CHECK_THROWS_WITH_ALL(ones({1}).expand({k2e32, k2e32}), "expand", "[4294967296, 4294967296]", "overflow");
  CHECK_THROWS_WITH_ALL(ones({1, 1}).expand({kMax, 2}), "expand", "overflow");
  // An empty dim does not hide an overflowing one: the strides of the other dims still overflow.
  CHECK_THROWS_WITH_ALL(ones({1}).expand({0, k2e32, k2e32}), "expand", "overflow");
  // Large, but countable.
  CHECK(ones({1}).expand({k2e32, 1 << 20}).numel() == (int64_t{1} << 52));
}

TEST_CASE("factories refuse shapes whose strides or byte size overflow, an empty dim or not") {
  CHECK_THROWS_WITH_ALL(empty({0, k2e62, 4}), "empty", "[0, 4611686018427387904, 4]", "overflow");
  CHECK_THROWS_WITH_ALL(zeros({k2e62, 4, 0}), "overflow", "[4611686018427387904, 4, 0]");
  CHECK_THROWS_WITH_ALL(empty({k2e62, 4}), "empty", "overflow");
  CHECK_THROWS_WITH_ALL(rand({k2e62, 4, 0}), "rand", "overflow");
  CHECK_THROWS_WITH_ALL(randint(0, 5, {0, kMax, 2}), "randint", "overflow");
  CHECK_THROWS_WITH_ALL(empty({2, -1}), "empty", "[2, -1]");
  CHECK(empty({0, k2e32, k2e32 / 4}).numel() == 0);
}

TEST_CASE("view and reshape refuse target shapes whose strides overflow") {
  const Tensor nothing = empty({0});
  CHECK_THROWS_WITH_ALL(nothing.view({k2e62, 4, 0}), "view", "[4611686018427387904, 4, 0]", "overflow");
  CHECK_THROWS_WITH_ALL(nothing.reshape({0, k2e62, 4}), "reshape", "overflow");
  CHECK_THROWS_WITH_ALL(nothing.view({k2e62, -1, 4}), "view");
  CHECK(nothing.view({k2e32, 0, 16}).sizes() == Shape{k2e32, 0, 16});
}

TEST_CASE("narrow and slice refuse ends past int64") {
  const Tensor x = arange(5.0);
  CHECK_THROWS_WITH_ALL(x.narrow(0, 1, kMax), "narrow", "9223372036854775807", "[5]");
  CHECK_THROWS_WITH_ALL(x.narrow(0, kMax, 1), "narrow", "[5]");
  CHECK(x.slice(0, 1, kMax).to_vector<double>() == std::vector<double>{1, 2, 3, 4});
  CHECK(x.slice(0, 1, std::nullopt, kMax).to_vector<double>() == std::vector<double>{1});
  // A step past int64 over a dim of stride 3: one element, and no overflowing stride.
  const Tensor grid = arange(6.0).reshape({2, 3});
  const Tensor column = grid.slice(1, 0, std::nullopt, kMax);
  CHECK(column.sizes() == Shape{2, 1});
  CHECK(column.to_vector<double>() == std::vector<double>{0, 3});
}

TEST_CASE("cat refuses a concatenated size past int64") {
  const Tensor huge = ones({1}).expand({k2e62 + k2e62 / 2});
  CHECK_THROWS_WITH_ALL(cat({huge, huge}), "cat", "overflow");
}

TEST_CASE("positional encodings refuse an offset whose end is past int64") {
  nn::SinusoidalPositionalEncoding sinusoidal(4, 16);
  nn::LearnedPositionalEmbedding learned(16, 4);
  const Tensor x = zeros({1, 3, 4});
  CHECK_THROWS_WITH_ALL(sinusoidal.forward(x, kMax), "SinusoidalPositionalEncoding", "9223372036854775807",
                        "max_len 16");
  CHECK_THROWS_WITH_ALL(learned.forward(x, kMax - 1), "LearnedPositionalEmbedding", "max_len 16");
  CHECK(sinusoidal.forward(x, 13).sizes() == Shape{1, 3, 4});
}

TEST_CASE("pad_batch keeps a pad id above 2^53 exactly and rounds lengths up without overflow") {
  const int64_t pad = (int64_t{1} << 53) + 1;
  const datasets::PaddedBatch batch = datasets::pad_batch({{1, 2, 3}, {4}}, pad);
  CHECK(batch.ids.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, pad, pad});
  // Rounding 3 up to a multiple of INT64_MAX is INT64_MAX, computed without overflowing; a batch
  // that long is then refused where it is allocated.
  const int64_t largest = std::numeric_limits<int64_t>::max();
  CHECK_THROWS_WITH_ALL(datasets::pad_batch({{1, 2, 3}}, 0, -1, largest), "9223372036854775807");
  CHECK(datasets::pad_batch({{1, 2, 3}}, 0, -1, 4).ids.size(1) == 4);
  CHECK(datasets::pad_batch({{1, 2, 3}}, 0, -1, 3).ids.size(1) == 3);
}
