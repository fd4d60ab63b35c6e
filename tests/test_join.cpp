// cat, stack, split and chunk: values against index-by-index references, gradients, views, errors.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// The element of a 3-D tensor that cat along `dim` puts at (i, j, k), found by walking the
// inputs' sizes along dim.
double cat_reference(const std::vector<Tensor>& parts, int64_t dim, int64_t i, int64_t j, int64_t k) {
  int64_t position[3] = {i, j, k};
  for (const Tensor& part : parts) {
    if (position[dim] < part.size(dim)) return part.at<double>(position[0], position[1], position[2]);
    position[dim] -= part.size(dim);
  }
  FAIL("position past the end of the inputs");
  return 0;
}

Shape sizes_of(const std::vector<Tensor>& pieces, int64_t dim) {
  Shape sizes;
  for (const Tensor& piece : pieces) sizes.push_back(piece.size(dim));
  return sizes;
}

}  // namespace

TEST_CASE("cat matches an element-by-element reference along every dim, strided inputs included") {
  manual_seed(1);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape a_shape{2, 3, 4}, b_shape{2, 3, 4}, c_shape{2, 3, 4};
    a_shape[d] = 1, b_shape[d] = 2, c_shape[d] = 3;
    const Tensor a = randn(a_shape, kFloat64);
    // b is a permuted view, c a sliced one: neither is contiguous.
    const Tensor b = randn({b_shape[2], b_shape[1], b_shape[0]}, kFloat64).permute({2, 1, 0});
    Shape c_wide = c_shape;
    c_wide[2] *= 2;
    const Tensor c = randn(c_wide, kFloat64).slice(2, 0, std::nullopt, 2);
    REQUIRE_FALSE(b.is_contiguous());
    REQUIRE_FALSE(c.is_contiguous());
    const Tensor out = cat({a, b, c}, dim);
    Shape expected_shape{2, 3, 4};
    expected_shape[d] = 6;
    REQUIRE(out.sizes() == expected_shape);
    for (int64_t i = 0; i < out.size(0); ++i) {
      for (int64_t j = 0; j < out.size(1); ++j) {
        for (int64_t k = 0; k < out.size(2); ++k) {
          CHECK(out.at<double>(i, j, k) == cat_reference({a, b, c}, d, i, j, k));
        }
      }
    }
  }
}

TEST_CASE("cat works for int64 and bool, and with empty pieces") {
  const Tensor a = tensor<int64_t>({1, 2, 3, 4}, {2, 2});
  const Tensor b = tensor<int64_t>({5, 6}, {2, 1});
  const Tensor empty_piece = zeros({2, 0}, kInt64);
  CHECK(cat({a, empty_piece, b}, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 5, 3, 4, 6});
  const Tensor t = ones({1, 2}, kBool);
  const Tensor f = zeros({1, 2}, kBool);
  CHECK(cat({t, f}).to_vector<bool>() == std::vector<bool>{true, true, false, false});
}

TEST_CASE("cat gradcheck, with a strided input and along a negative dim") {
  const Tensor a = leaf({2, 3});
  const Tensor b = as_leaf(leaf({2, 2}).t());  // non-contiguous leaf of shape [2, 2]
  const Tensor c = leaf({2, 1});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return cat({in[0], in[1], in[2]}, -1); },
                  std::vector<Tensor>{a, b, c});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return cat({in[0], in[0].transpose(0, 1).narrow(0, 0, 2)}, 0); },
                  std::vector<Tensor>{leaf({2, 2})});
}

TEST_CASE("stack adds a new dim; its values and gradients follow unsqueeze + cat") {
  manual_seed(2);
  const Tensor a = randn({2, 3}, kFloat64), b = randn({3, 2}, kFloat64).t();
  for (int64_t dim : {0, 1, 2, -1}) {
    const Tensor out = stack({a, b}, dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape expected_shape{2, 3};
    expected_shape.insert(expected_shape.begin() + d, 2);
    REQUIRE(out.sizes() == expected_shape);
    for (int64_t which = 0; which < 2; ++which) {
      check_close(out.select(d, which), which == 0 ? a : b, 0, 0);
    }
  }
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return stack({in[0], in[1], in[0]}, 1); },
                  std::vector<Tensor>{leaf({2, 3}), as_leaf(leaf({3, 2}).t())});
}

TEST_CASE("split by size and by sizes gives views of consecutive pieces") {
  const Tensor x = arange(20.0, kFloat64).reshape({4, 5});
  const std::vector<Tensor> by_size = split(x, 2, 1);
  REQUIRE(by_size.size() == 3);
  CHECK(sizes_of(by_size, 1) == Shape{2, 2, 1});
  CHECK(by_size[1].to_vector<double>() == std::vector<double>{2, 3, 7, 8, 12, 13, 17, 18});
  CHECK(by_size[2].to_vector<double>() == std::vector<double>{4, 9, 14, 19});
  CHECK(by_size[1].data_ptr<double>() == x.data_ptr<double>() + 2);  // a view, no copy

  const std::vector<Tensor> by_sizes = split(x, std::vector<int64_t>{1, 0, 3}, 0);
  REQUIRE(by_sizes.size() == 3);
  CHECK(sizes_of(by_sizes, 0) == Shape{1, 0, 3});
  CHECK(by_sizes[0].to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4});
  check_close(by_sizes[2], x.narrow(0, 1, 3), 0, 0);

  CHECK(sizes_of(split(x, 10, -1), 1) == Shape{5});
  CHECK(sizes_of(split(zeros({0, 3}), 2, 0), 0) == Shape{0});
}

TEST_CASE("chunk follows torch.chunk") {
  const Tensor x = arange(6.0, kFloat64);
  CHECK(sizes_of(chunk(x, 3), 0) == Shape{2, 2, 2});
  CHECK(sizes_of(chunk(x, 4), 0) == Shape{2, 2, 2});  // ceil(6 / 4) = 2 per chunk: only 3 chunks
  CHECK(sizes_of(chunk(x, 5), 0) == Shape{2, 2, 2});
  CHECK(sizes_of(chunk(arange(5.0), 3), 0) == Shape{2, 2, 1});
  CHECK(sizes_of(chunk(x, 10), 0) == Shape{1, 1, 1, 1, 1, 1});
  CHECK(sizes_of(chunk(zeros({0}), 3), 0) == Shape{0, 0, 0});
  CHECK(chunk(x, 3)[2].to_vector<double>() == std::vector<double>{4, 5});
  const Tensor m = arange(12.0, kFloat64).reshape({3, 4});
  const std::vector<Tensor> columns = chunk(m, 2, -1);
  CHECK(columns[1].to_vector<double>() == std::vector<double>{2, 3, 6, 7, 10, 11});
}

TEST_CASE("split and chunk gradcheck: every piece carries its gradient back") {
  // Scaling each piece differently makes a wrong window visible in the gradient.
  auto weighted = [](const std::vector<Tensor>& pieces) {
    std::vector<Tensor> scaled;
    for (size_t i = 0; i < pieces.size(); ++i) scaled.push_back(mul(pieces[i], static_cast<double>(i + 1)));
    return cat(scaled, 1);
  };
  const Tensor x = as_leaf(leaf({5, 2}).t());  // [2, 5], non-contiguous
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return weighted(split(in[0], 2, 1)); },
                  std::vector<Tensor>{x});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return weighted(split(in[0], {3, 0, 2}, -1)); },
                  std::vector<Tensor>{x});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return weighted(chunk(in[0], 3, 1)); },
                  std::vector<Tensor>{x});
  // Only some pieces used: the others get zero gradient.
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return chunk(in[0], 2, 0)[1]; },
                  std::vector<Tensor>{leaf({3, 2})});
}

TEST_CASE("join and split errors") {
  const Tensor a = zeros({2, 3}), b = zeros({3, 3});
  CHECK_THROWS_WITH_ALL(cat({}, 0), "cat", "non-empty");
  CHECK_THROWS_WITH_ALL(cat({a, b}, 1), "cat", "[2, 3]", "[3, 3]", "dim 0", "2 != 3");
  CHECK_THROWS_WITH_ALL(cat({a, zeros({2})}, 0), "cat", "[2, 3]", "[2]", "ranks differ");
  CHECK_THROWS_WITH_ALL(cat({a, zeros({2, 3}, kFloat64)}, 0), "cat", "dtype mismatch", "float32", "float64");
  CHECK_THROWS_WITH_ALL(cat({a, a}, 2), "cat", "dim");
  CHECK_THROWS_WITH_ALL(cat({scalar_tensor(1.0), scalar_tensor(2.0)}, 0), "cat", "0-d");
  CHECK_THROWS_WITH_ALL(stack({}, 0), "stack", "non-empty");
  CHECK_THROWS_WITH_ALL(stack({a, b}, 0), "stack", "equal shape", "[2, 3]", "[3, 3]");
  CHECK_THROWS_WITH_ALL(split(a, 0, 1), "split", "split_size", "positive", "0");
  CHECK_THROWS_WITH_ALL(split(a, {1, 1}, 1), "split", "[1, 1]", "add up to 2", "size 3");
  CHECK_THROWS_WITH_ALL(split(a, {4, -1}, 1), "split", "non-negative");
  CHECK_THROWS_WITH_ALL(chunk(a, 0, 0), "chunk", "positive", "0");
  CHECK_THROWS_WITH_ALL(chunk(scalar_tensor(1.0), 2, 0), "chunk", "0-d");
}
