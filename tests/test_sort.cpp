// sort, argsort and topk: values and indices against std::stable_sort on each row, stability,
// NaN placement, gradients of the values, and errors.
#include <algorithm>
#include <numeric>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Sorts every line of a 3-D tensor along `dim` independently with std::stable_sort and checks
// the first `k` values and indices of `result` against it. NaN sorts as the largest value.
void check_rows_sorted(const Tensor& x, int64_t dim, int64_t k, bool descending, const ValuesIndices& result) {
  Shape expected_shape = x.sizes();
  expected_shape[dim] = k;
  REQUIRE(result.values.sizes() == expected_shape);
  REQUIRE(result.indices.sizes() == expected_shape);
  REQUIRE(result.indices.dtype() == kInt64);
  auto before = [descending](double a, double b) {
    const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
    if (a_nan || b_nan) return descending ? (a_nan && !b_nan) : (b_nan && !a_nan);
    return descending ? a > b : a < b;
  };
  int64_t other[2], n = 0;
  for (int64_t d = 0; d < 3; ++d) {
    if (d != dim) other[n++] = d;
  }
  for (int64_t p = 0; p < x.size(other[0]); ++p) {
    for (int64_t q = 0; q < x.size(other[1]); ++q) {
      auto element = [&](const Tensor& t, int64_t r) -> auto& {
        int64_t at[3];
        at[other[0]] = p, at[other[1]] = q, at[dim] = r;
        return t.at<double>(at[0], at[1], at[2]);
      };
      auto index_at = [&](int64_t r) {
        int64_t at[3];
        at[other[0]] = p, at[other[1]] = q, at[dim] = r;
        return result.indices.at<int64_t>(at[0], at[1], at[2]);
      };
      std::vector<int64_t> order(x.size(dim));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t i, int64_t j) { return before(element(x, i), element(x, j)); });
      for (int64_t r = 0; r < k; ++r) {
        CHECK(index_at(r) == order[r]);
        const double expected = element(x, order[r]);
        const double actual = element(result.values, r);
        CHECK((actual == expected || (std::isnan(actual) && std::isnan(expected))));
      }
    }
  }
}

}  // namespace

TEST_CASE("sort matches std::stable_sort along every dim, ties and strided inputs included") {
  manual_seed(7);
  // Small integers give many ties, so stability shows in the indices.
  const Tensor ties = randint(0, 4, {4, 5, 6}).to(kFloat64).permute({2, 0, 1});  // [6, 4, 5], strided
  const Tensor distinct = randn({3, 5, 4}, kFloat64).transpose(1, 2);
  for (const Tensor& x : {ties, distinct}) {
    for (int64_t dim : {0, 1, 2}) {
      for (bool descending : {false, true}) {
        check_rows_sorted(x, dim, x.size(dim), descending, sort(x, dim, descending));
        check_close(argsort(x, dim, descending), sort(x, dim, descending).indices, 0, 0);
      }
    }
  }
  const ValuesIndices last = sort(ties, -1);
  check_close(last.indices, sort(ties, 2).indices, 0, 0);
}

TEST_CASE("sort of int64, of a 0-d tensor and of an empty dim") {
  const ValuesIndices ints = sort(tensor<int64_t>({3, -1, 3, 2}), 0, true);
  CHECK(ints.values.to_vector<int64_t>() == std::vector<int64_t>{3, 3, 2, -1});
  CHECK(ints.indices.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 3, 1});
  const ValuesIndices scalar = sort(scalar_tensor(2.5, kFloat64));
  CHECK(scalar.values.dim() == 0);
  CHECK(scalar.values.item() == 2.5);
  CHECK(scalar.indices.item<int64_t>() == 0);
  CHECK(sort(zeros({3, 0}), 1).values.sizes() == Shape{3, 0});
  CHECK(sort(zeros({0, 3}), 1).indices.sizes() == Shape{0, 3});
}

TEST_CASE("NaN sorts as the largest value and never breaks the sort") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = tensor({3.0, nan, 1.0, nan, 2.0}, {5}, kFloat64);
  const ValuesIndices up = sort(x);
  CHECK(up.indices.to_vector<int64_t>() == std::vector<int64_t>{2, 4, 0, 1, 3});
  const ValuesIndices down = sort(x, 0, true);
  CHECK(down.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 4, 2});
  CHECK(std::isnan(down.values.at<double>(0)));
  CHECK(down.values.at<double>(2) == 3.0);
  CHECK(topk(x, 3).indices.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0});
  CHECK(topk(x, 2, 0, false).indices.to_vector<int64_t>() == std::vector<int64_t>{2, 4});
  // Many NaNs among many values (a comparator that is not a strict weak order can crash here).
  Tensor many = randn({4, 300}, kFloat64);
  many = masked_fill(many, gt(many, 0.5), nan);
  check_rows_sorted(many.unsqueeze(0), 2, 300, false, sort(many.unsqueeze(0), 2));
  check_rows_sorted(many.unsqueeze(0), 2, 17, true, topk(many.unsqueeze(0), 17, 2));
}

TEST_CASE("topk gives the k largest or smallest, sorted, along any dim") {
  manual_seed(8);
  const Tensor x = randn({5, 4, 6}, kFloat64).transpose(0, 2);  // [6, 4, 5], strided
  for (int64_t dim : {0, 1, 2}) {
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3}, x.size(dim)}) {
      check_rows_sorted(x, dim, k, true, topk(x, k, dim, true));
      check_rows_sorted(x, dim, k, false, topk(x, k, dim, false));
    }
  }
  // Ties: the earlier element first, as a stable sort would.
  const ValuesIndices tied = topk(tensor<int64_t>({1, 5, 5, 2, 5}), 2);
  CHECK(tied.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  const ValuesIndices last = topk(x, 2);
  CHECK(last.values.sizes() == Shape{6, 4, 2});
}

TEST_CASE("gradients of sorted and top-k values go back to where the values came from") {
  Tensor w = tensor({0.5, 3.0, -1.0, 2.0}, {4}, kFloat64).requires_grad_();
  mul(topk(w, 2).values, tensor({10.0, 1.0}, {2}, kFloat64)).sum().backward();
  check_close(w.grad(), tensor({0.0, 10.0, 0.0, 1.0}, {4}, kFloat64), 0, 0);
  CHECK_FALSE(topk(w, 2).indices.requires_grad());

  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return topk(in[0], 2, -1).values; },
                  std::vector<Tensor>{leaf({3, 4})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return topk(in[0], 3, 0, false).values; },
                  std::vector<Tensor>{as_leaf(leaf({4, 3}).t())});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return topk(in[0], 2, 1).values; },
                  std::vector<Tensor>{leaf({2, 3, 2})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return sort(in[0], 0, true).values; },
                  std::vector<Tensor>{as_leaf(leaf({3, 4}).t())});
}

TEST_CASE("sort and topk errors") {
  const Tensor x = zeros({3, 5});
  CHECK_THROWS_WITH_ALL(topk(x, 6, 1), "topk", "k 6", "size 5", "dim 1", "[3, 5]");
  CHECK_THROWS_WITH_ALL(topk(x, 4, 0), "topk", "k 4", "size 3", "dim 0");
  CHECK_THROWS_WITH_ALL(topk(x, -1, 1), "topk", "non-negative", "-1");
  CHECK_THROWS_WITH_ALL(topk(x, 1, 2), "topk", "dim");
  CHECK_THROWS_WITH_ALL(sort(x, -3), "sort", "dim");
  CHECK_THROWS_WITH_ALL(argsort(x, 5), "argsort", "dim");
}

TEST_CASE("many rows sort in parallel and agree with std::stable_sort") {
  manual_seed(10);
  const Tensor x = randint(0, 20, {1, 600, 100}).to(kFloat64);
  check_rows_sorted(x, 2, 100, false, sort(x, 2));
  check_rows_sorted(x, 1, 7, true, topk(x, 7, 1));
}
