// Reductions: forward values against naive loops, gradients by gradcheck, ties, NaN, infinities
// and the errors each op documents.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Groups x's elements by output position of a reduction over `dims` (empty = all) and returns
// the groups, each in row-major order over the reduced dims, plus the output shape.
struct Groups {
  std::vector<std::vector<double>> values;
  Shape shape;
};

Groups group_elements(const Tensor& x, Shape dims, bool keepdim) {
  const int64_t rank = x.dim();
  std::vector<bool> reduced(rank, dims.empty());
  for (int64_t d : dims) reduced[d < 0 ? d + rank : d] = true;
  Groups groups;
  int64_t outputs = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      groups.shape.push_back(x.sizes()[d]);
      outputs *= x.sizes()[d];
    } else if (keepdim) {
      groups.shape.push_back(1);
    }
  }
  groups.values.resize(outputs);
  const std::vector<double> data = x.to_vector<double>();
  for (int64_t flat = 0; flat < static_cast<int64_t>(data.size()); ++flat) {
    int64_t rest = flat, out = 0, out_stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t index = rest % x.sizes()[d];
      rest /= x.sizes()[d];
      if (!reduced[d]) {
        out += index * out_stride;
        out_stride *= x.sizes()[d];
      }
    }
    groups.values[out].push_back(data[flat]);
  }
  return groups;
}

// The reference result of reducing each group with `fn`, as a float64 tensor.
Tensor naive_reduce(const Tensor& x, const Shape& dims, bool keepdim,
                    const std::function<double(const std::vector<double>&)>& fn) {
  const Groups groups = group_elements(x, dims, keepdim);
  std::vector<double> out;
  for (const auto& group : groups.values) out.push_back(fn(group));
  return tensor(out, groups.shape, kFloat64);
}

double naive_sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double naive_mean(const std::vector<double>& v) { return naive_sum(v) / static_cast<double>(v.size()); }
double naive_var(const std::vector<double>& v, bool unbiased) {
  const double m = naive_mean(v);
  double squares = 0;
  for (double e : v) squares += (e - m) * (e - m);
  return squares / static_cast<double>(v.size() - (unbiased ? 1 : 0));
}
double naive_logsumexp(const std::vector<double>& v) {
  double total = 0;
  for (double e : v) total += std::exp(e);
  return std::log(total);
}
double naive_max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double naive_min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double naive_argmax(const std::vector<double>& v) {
  return static_cast<double>(std::max_element(v.begin(), v.end()) - v.begin());  // first of ties
}
double naive_argmin(const std::vector<double>& v) {
  return static_cast<double>(std::min_element(v.begin(), v.end()) - v.begin());
}

// Inputs of every layout the tests use, built from one [2, 3, 4] shape: contiguous, a
// transposed view and a strided slice of a larger tensor.
std::vector<Tensor> layouts_of_2x3x4(DType dtype) {
  const Tensor base = dtype == kInt64 ? randint(-20, 20, {2, 3, 4}) : randn({2, 3, 4}, dtype);
  const Tensor transposed = (dtype == kInt64 ? randint(-20, 20, {2, 4, 3}) : randn({2, 4, 3}, dtype)).transpose(1, 2);
  const Tensor sliced = (dtype == kInt64 ? randint(-20, 20, {2, 6, 5}) : randn({2, 6, 5}, dtype))
                            .slice(1, 0, std::nullopt, 2)
                            .narrow(2, 1, 4);
  return {base, transposed, sliced};
}

// The dims lists the forward tests sweep.
const std::vector<Shape> kDimsLists = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {-3, -2}, {1, 2}, {0, 1, 2}};

GradcheckFunction reduce_fn(std::function<Tensor(const Tensor&)> op) {
  return [op](const std::vector<Tensor>& in) { return op(in[0]); };
}

}  // namespace

TEST_CASE("sum matches a naive loop over every dims list, layout, keepdim and dtype") {
  manual_seed(1);
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    for (const Tensor& x : layouts_of_2x3x4(dtype)) {
      for (const Shape& dims : kDimsLists) {
        for (bool keepdim : {false, true}) {
          CAPTURE(shape_str(dims));
          const Tensor out = sum(x, dims, keepdim);
          CHECK(out.dtype() == dtype);
          check_close(out, naive_reduce(x, dims, keepdim, naive_sum), 1e-5);
        }
      }
    }
  }
  check_close(sum(tensor({1.0, 2.0, 3.5}, {3})), scalar_tensor(6.5, kFloat64));
  check_close(sum(scalar_tensor(4.0)), scalar_tensor(4.0));
  check_close(sum(zeros({0, 3}), {0}), zeros({3}));
  const Tensor x = arange(6.0, kFloat64).reshape({2, 3});
  check_close(x.sum({1}, true), tensor({3.0, 12.0}, {2, 1}));
}

TEST_CASE("sum of a long row and of many columns, across the threaded and tiled paths") {
  manual_seed(2);
  const Tensor row = randn({70001}, kFloat32);
  check_close(sum(row), naive_reduce(row, {}, false, naive_sum), 1e-3, 1e-5);
  const Tensor columns = randn({3, 150, 70}, kFloat64);  // inner 70 spans two column tiles
  check_close(sum(columns, {1}), naive_reduce(columns, {1}, false, naive_sum), 1e-9);
  const Tensor ints = randint(-5, 5, {40, 1000});
  check_close(sum(ints, {0}), naive_reduce(ints, {0}, false, naive_sum), 0);
}

TEST_CASE("mean matches a naive loop") {
  manual_seed(3);
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Tensor& x : layouts_of_2x3x4(dtype)) {
      for (const Shape& dims : kDimsLists) {
        for (bool keepdim : {false, true}) {
          CAPTURE(shape_str(dims));
          check_close(mean(x, dims, keepdim), naive_reduce(x, dims, keepdim, naive_mean), 1e-6);
        }
      }
    }
  }
  const Tensor y = randn({3, 4}, kFloat64);
  check_close(y.mean(), naive_reduce(y, {}, false, naive_mean));
  check_close(y.mean({0}, true), naive_reduce(y, {0}, true, naive_mean));
}

TEST_CASE("var and std match a naive two-pass loop, biased and unbiased") {
  manual_seed(4);
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Tensor& x : layouts_of_2x3x4(dtype)) {
      for (const Shape& dims : kDimsLists) {
        for (bool keepdim : {false, true}) {
          for (bool unbiased : {true, false}) {
            CAPTURE(shape_str(dims));
            CAPTURE(unbiased);
            const auto reference = [unbiased](const std::vector<double>& v) { return naive_var(v, unbiased); };
            const Tensor expected_var = naive_reduce(x, dims, keepdim, reference);
            check_close(var(x, dims, unbiased, keepdim), expected_var, 1e-5);
            check_close(ember::std(x, dims, unbiased, keepdim), sqrt(expected_var), 1e-5);
          }
        }
      }
    }
  }
  const Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, {4});
  check_close(var(x), scalar_tensor(5.0 / 3.0, kFloat64));
  check_close(var(x, /*unbiased=*/false), scalar_tensor(1.25, kFloat64));
  check_close(ember::std(x, /*unbiased=*/false), scalar_tensor(std::sqrt(1.25), kFloat64));
  // One element with Bessel's correction divides by zero: NaN, as in PyTorch.
  CHECK(std::isnan(var(tensor({3.0}, {1})).item()));
}

TEST_CASE("var is stable when the mean is large against the spread") {
  // A one-pass E[x^2] - E[x]^2 loses every digit here; two passes keep them.
  const Tensor shifted = add(tensor({1.0, 2.0, 3.0, 4.0}, {4}), 1e9);
  check_close(var(shifted), scalar_tensor(5.0 / 3.0, kFloat64), 1e-9);
  const Tensor shifted32 = add(tensor({1.0f, 2.0f, 3.0f, 4.0f}, {4}), 1e4);
  check_close(var(shifted32, false), scalar_tensor(1.25), 1e-4);
  // The column path too: reduce dim 0 of [4, 70].
  const Tensor columns = add(expand(tensor({1.0, 2.0, 3.0, 4.0}, {4, 1}), {4, 70}), 1e9);
  check_close(var(columns, {0}), full({70}, 5.0 / 3.0, kFloat64), 1e-9);
}

TEST_CASE("var and std over many columns and a long row") {
  manual_seed(5);
  const Tensor columns = randn({2, 150, 130}, kFloat64);  // threaded over columns
  for (const Shape& dims : std::vector<Shape>{{1}, {0, 1}}) {
    const Tensor expected = naive_reduce(columns, dims, false, [](const auto& v) { return naive_var(v, true); });
    check_close(var(columns, dims), expected, 1e-9);
  }
  const Tensor row = randn({40000}, kFloat32);
  check_close(ember::std(row), sqrt(naive_reduce(row, {}, false, [](const auto& v) { return naive_var(v, true); })),
              1e-4);
}

TEST_CASE("logsumexp matches a naive loop and survives large and infinite values") {
  manual_seed(6);
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Tensor& x : layouts_of_2x3x4(dtype)) {
      for (const Shape& dims : kDimsLists) {
        for (bool keepdim : {false, true}) {
          CAPTURE(shape_str(dims));
          check_close(logsumexp(x, dims, keepdim), naive_reduce(x, dims, keepdim, naive_logsumexp), 1e-5);
        }
      }
    }
  }
  // exp(1000) overflows; subtracting the max first does not.
  check_close(logsumexp(tensor({1000.0, 1000.0}, {2}), {0}), scalar_tensor(1000.0 + std::log(2.0), kFloat64));
  check_close(logsumexp(tensor({-1000.0f, -1000.0f}, {2}), {0}), scalar_tensor(-1000.0 + std::log(2.0)), 1e-3);
  // A row of -inf gives -inf, a row holding +inf gives +inf; neither is NaN.
  const Tensor x = tensor({-kInf, -kInf, 0.0, -kInf, kInf, 1.0}, {3, 2});
  check_close(logsumexp(x, {1}), tensor({-kInf, 0.0, kInf}, {3}));
  // The same along columns (inner > 1).
  check_close(logsumexp(x.t().contiguous(), {0}), tensor({-kInf, 0.0, kInf}, {3}));
  CHECK(std::isnan(logsumexp(tensor({1.0, kNaN}, {2}), {0}).item()));
  check_close(logsumexp(zeros({2, 0}), {1}), tensor({-kInf, -kInf}, {2}));
  const Tensor columns = randn({3, 200, 70}, kFloat64);  // threaded over columns
  check_close(logsumexp(columns, {1}), naive_reduce(columns, {1}, false, naive_logsumexp), 1e-9);
}

TEST_CASE("logsumexp of an all -inf row has a zero gradient, not NaN") {
  Tensor x = tensor({-kInf, -kInf, 0.0, 1.0}, {2, 2}).requires_grad_();
  logsumexp(x, {1}).sum().backward();
  const double e = std::exp(1.0);
  check_close(x.grad(), tensor({0.0, 0.0, 1.0 / (1.0 + e), e / (1.0 + e)}, {2, 2}));
}

TEST_CASE("float32 logsumexp of millions of terms, and its gradient, agree with float64") {
  // A float32 running total of n terms drifts by up to about n * 2^-24 of itself: summed so,
  // 5M terms moved the result by 7.6e-4, and so every gradient element exp(x - result) by
  // 7.6e-4 relatively. Summed in double, the result is the float64 value rounded once to
  // float32: the result is near 16, so within half an ulp, 2^-20 ~ 9.5e-7. A gradient element
  // inherits that as a relative error, plus the rounding of x - result (also near -16, so
  // another 9.5e-7) and float32 exp's own few 1e-7. The bounds below hold those with a margin
  // and sit 30 times under what a float32 total of 3M terms gave (1.3e-4).
  constexpr double kResultError = 2e-6, kGradientError = 4e-6;
  manual_seed(16);
  struct Case {
    std::string what;
    Tensor values;
    int64_t dim;
  };
  // One long row (the vectorised row loop) and four long columns (the column tiles).
  for (const Case& c : {Case{"a row of 5M", randn({5000000}), 0}, Case{"4 columns of 3M", randn({3000000, 4}), 0}}) {
    CAPTURE(c.what);
    const Tensor x = as_leaf(c.values);
    const Tensor result = logsumexp(x, {c.dim});
    result.sum().backward();
    // The reference, in float64 from the same float32 values: randn stays far from exp's
    // overflow, so no shift is needed.
    const int64_t outputs = result.numel(), n = x.numel() / outputs;
    const std::vector<double> v = c.values.to_vector<double>();
    const std::vector<double> got = result.to_vector<double>(), grad = x.grad().to_vector<double>();
    double worst_result = 0, worst_gradient = 0;
    for (int64_t o = 0; o < outputs; ++o) {
      // Row-major [n] or [n, outputs]: element r of output o is at r * outputs + o.
      double total = 0;
      for (int64_t r = 0; r < n; ++r) total += std::exp(v[r * outputs + o]);
      const double expected = std::log(total);
      worst_result = std::max(worst_result, std::abs(got[o] - expected));
      for (int64_t r = 0; r < n; ++r) {
        const int64_t at = r * outputs + o;
        const double expected_grad = std::exp(v[at] - expected);
        worst_gradient = std::max(worst_gradient, std::abs(grad[at] - expected_grad) / expected_grad);
      }
    }
    CHECK_MESSAGE(worst_result <= kResultError, "result off by " << worst_result);
    CHECK_MESSAGE(worst_gradient <= kGradientError, "gradient off by " << worst_gradient << " relatively");
  }
}

TEST_CASE("amax and amin match a naive loop, on every numeric dtype") {
  manual_seed(7);
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    for (const Tensor& x : layouts_of_2x3x4(dtype)) {
      for (const Shape& dims : kDimsLists) {
        for (bool keepdim : {false, true}) {
          CAPTURE(shape_str(dims));
          const Tensor high = amax(x, dims, keepdim), low = amin(x, dims, keepdim);
          CHECK(high.dtype() == dtype);
          check_close(high, naive_reduce(x, dims, keepdim, naive_max), 0, 0);
          check_close(low, naive_reduce(x, dims, keepdim, naive_min), 0, 0);
        }
      }
    }
  }
  const Tensor columns = randn({3, 20, 70}, kFloat32);
  check_close(amax(columns, {1}), naive_reduce(columns, {1}, false, naive_max), 0, 0);
  check_close(amin(columns, {0, 1}), naive_reduce(columns, {0, 1}, false, naive_min), 0, 0);
  const Tensor row = randn({50000}, kFloat64);
  check_close(amax(row, {0}), naive_reduce(row, {}, false, naive_max), 0, 0);
  // Reducing a dim of an empty tensor that is not the empty one gives an empty result.
  CHECK(amax(zeros({0, 3}), {1}).sizes() == Shape{0});
}

TEST_CASE("max and min of all elements") {
  const Tensor x = tensor({3.0, -1.0, 7.0, 2.0, 7.0, -4.0}, {2, 3});
  check_close(max(x), scalar_tensor(7.0, kFloat64));
  check_close(min(x), scalar_tensor(-4.0, kFloat64));
  check_close(max(x.t()), scalar_tensor(7.0, kFloat64));
  const Tensor ints = tensor<int64_t>({5, -9, 12, 3}, {2, 2});
  CHECK(max(ints).item<int64_t>() == 12);
  CHECK(min(ints).item<int64_t>() == -9);
  CHECK(max(ints).dtype() == kInt64);
  check_close(max(scalar_tensor(2.5)), scalar_tensor(2.5));
}

TEST_CASE("NaN propagates through amax, amin, max and min") {
  const Tensor x = tensor({1.0, kNaN, 3.0, 4.0, 5.0, 6.0}, {2, 3});
  CHECK(std::isnan(max(x).item()));
  CHECK(std::isnan(min(x).item()));
  const std::vector<double> rows = amax(x, {1}).to_vector<double>();
  CHECK(std::isnan(rows[0]));
  CHECK(rows[1] == 6.0);
  const std::vector<double> columns = amin(x, {0}).to_vector<double>();  // inner > 1
  CHECK(columns[0] == 1.0);
  CHECK(std::isnan(columns[1]));
  CHECK(columns[2] == 3.0);
}

TEST_CASE("amax, amin, max and min share the gradient evenly between ties") {
  Tensor x = tensor({1.0, 5.0, 5.0, 2.0, 2.0, 0.0}, {2, 3}).requires_grad_();
  amax(x, {1}).sum().backward();
  check_close(x.grad(), tensor({0.0, 0.5, 0.5, 0.5, 0.5, 0.0}, {2, 3}));
  x.mutable_grad().zero_();
  mul(amin(x, {0}, true), tensor({1.0, 2.0, 3.0}, {1, 3})).sum().backward();
  check_close(x.grad(), tensor({1.0, 0.0, 0.0, 0.0, 2.0, 3.0}, {2, 3}));
  x.mutable_grad().zero_();
  max(x).backward();
  check_close(x.grad(), tensor({0.0, 0.5, 0.5, 0.0, 0.0, 0.0}, {2, 3}));
  x.mutable_grad().zero_();
  min(x).backward();
  check_close(x.grad(), tensor({0.0, 0.0, 0.0, 0.0, 0.0, 1.0}, {2, 3}));
}

TEST_CASE("max and min along a dim give values and first indices, matching a naive loop") {
  manual_seed(8);
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    for (const Tensor& x : layouts_of_2x3x4(dtype)) {
      for (int64_t dim : {0, 1, 2, -1, -3}) {
        for (bool keepdim : {false, true}) {
          CAPTURE(dim);
          const ValuesIndices high = max(x, dim, keepdim), low = min(x, dim, keepdim);
          CHECK(high.values.dtype() == dtype);
          CHECK(high.indices.dtype() == kInt64);
          check_close(high.values, naive_reduce(x, {dim}, keepdim, naive_max), 0, 0);
          check_close(high.indices, naive_reduce(x, {dim}, keepdim, naive_argmax), 0, 0);
          check_close(low.values, naive_reduce(x, {dim}, keepdim, naive_min), 0, 0);
          check_close(low.indices, naive_reduce(x, {dim}, keepdim, naive_argmin), 0, 0);
        }
      }
    }
  }
  // Ties: the first index, along rows (inner == 1) and along columns.
  const Tensor ties = tensor<int64_t>({2, 7, 7, 1, 1, 0, 7, 1}, {2, 4});
  check_close(max(ties, 1).indices, tensor<int64_t>({1, 2}, {2}), 0, 0);
  check_close(min(ties, 1).indices, tensor<int64_t>({3, 1}, {2}), 0, 0);
  check_close(max(ties, 0).indices, tensor<int64_t>({0, 0, 0, 0}, {4}), 0, 0);
  check_close(min(ties, 0).indices, tensor<int64_t>({1, 1, 0, 0}, {4}), 0, 0);
  const Tensor columns = randn({2, 300, 70}, kFloat64);  // threaded over columns
  check_close(max(columns, 1).indices, naive_reduce(columns, {1}, false, naive_argmax), 0, 0);
  check_close(min(columns, 1).values, naive_reduce(columns, {1}, false, naive_min), 0, 0);
  const ValuesIndices scalar = max(scalar_tensor(3.0), 0);
  CHECK(scalar.values.item() == 3.0);
  CHECK(scalar.indices.item<int64_t>() == 0);
}

TEST_CASE("max along a dim sends the gradient to the chosen index only") {
  Tensor x = tensor({1.0, 5.0, 5.0, 2.0, 2.0, 0.0}, {2, 3}).requires_grad_();
  ValuesIndices result = max(x, 1);
  CHECK(result.values.requires_grad());
  CHECK_FALSE(result.indices.requires_grad());
  mul(result.values, tensor({1.0, 2.0}, {2})).sum().backward();
  check_close(x.grad(), tensor({0.0, 1.0, 0.0, 2.0, 0.0, 0.0}, {2, 3}));
  x.mutable_grad().zero_();
  min(x, 0, /*keepdim=*/true).values.sum().backward();
  check_close(x.grad(), tensor({1.0, 0.0, 0.0, 0.0, 1.0, 1.0}, {2, 3}));
}

TEST_CASE("argmax and argmin along a dim and over the flattened tensor") {
  manual_seed(9);
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    for (const Tensor& x : layouts_of_2x3x4(dtype)) {
      for (int64_t dim : {0, 1, 2, -2}) {
        for (bool keepdim : {false, true}) {
          CAPTURE(dim);
          check_close(argmax(x, dim, keepdim), naive_reduce(x, {dim}, keepdim, naive_argmax), 0, 0);
          check_close(argmin(x, dim, keepdim), naive_reduce(x, {dim}, keepdim, naive_argmin), 0, 0);
        }
      }
      const Tensor flat_max = argmax(x), flat_min = argmin(x);
      CHECK(flat_max.dim() == 0);
      CHECK(flat_max.dtype() == kInt64);
      check_close(flat_max, naive_reduce(x, {}, false, naive_argmax), 0, 0);
      check_close(flat_min, naive_reduce(x, {}, false, naive_argmin), 0, 0);
    }
  }
  // The flat index counts in row-major order of the (transposed) view.
  const Tensor x = tensor({0.0, 9.0, 3.0, 4.0, 5.0, -6.0}, {2, 3}).t();  // [[0, 4], [9, 5], [3, -6]]
  CHECK(argmax(x).item<int64_t>() == 2);
  CHECK(argmin(x).item<int64_t>() == 5);
  CHECK(argmax(tensor({1.0, 3.0, 3.0}, {3})).item<int64_t>() == 1);
  const Tensor row = randn({60000}, kFloat32);
  CHECK(argmax(row).item<int64_t>() == static_cast<int64_t>(naive_argmax(row.to_vector<double>())));
  // argmax gives no gradient.
  CHECK_FALSE(argmax(leaf({3, 2}), 1).requires_grad());
}

TEST_CASE("argmax and argmin treat NaN as the extremum, first NaN winning") {
  const Tensor x = tensor({1.0, kNaN, 3.0, kNaN, 0.0, 2.0}, {2, 3});
  check_close(argmax(x, 1), tensor<int64_t>({1, 0}, {2}), 0, 0);
  check_close(argmin(x, 1), tensor<int64_t>({1, 0}, {2}), 0, 0);
  check_close(argmax(x, 0), tensor<int64_t>({1, 0, 0}, {3}), 0, 0);  // columns
  check_close(argmin(x, 0), tensor<int64_t>({1, 0, 1}, {3}), 0, 0);
  CHECK(argmax(x).item<int64_t>() == 1);
  const ValuesIndices result = max(x, 1);
  CHECK(std::isnan(result.values.to_vector<double>()[0]));
}

TEST_CASE("all and any over dims, on bool, float and int64") {
  const Tensor mask = tensor({true, false, true, true, true, true}, {2, 3});
  check_close(all(mask), scalar_tensor(0.0, kBool));
  check_close(any(mask), scalar_tensor(1.0, kBool));
  check_close(all(mask, {1}), tensor({false, true}, {2}));
  check_close(all(mask, {0}, true), tensor({true, false, true}, {1, 3}));
  check_close(any(mask.t(), {0}), tensor({true, true}, {2}));
  const Tensor zeros_rows = tensor({0.0, 0.0, 0.0, 1.5}, {2, 2});
  check_close(any(zeros_rows, {-1}), tensor({false, true}, {2}));
  check_close(all(zeros_rows, {-1}), tensor({false, false}, {2}));
  const Tensor ints = tensor<int64_t>({0, 1, 2, 3}, {2, 2});
  check_close(all(ints, {0}), tensor({false, true}, {2}));
  CHECK(all(ints).dtype() == kBool);
  // The empty conjunction is true, the empty disjunction false.
  CHECK(all(zeros({0})).item<bool>());
  CHECK_FALSE(any(zeros({0})).item<bool>());
}

TEST_CASE("gradcheck: sum and mean") {
  manual_seed(10);
  for (bool keepdim : {false, true}) {
    CHECK_GRADCHECK(reduce_fn([keepdim](const Tensor& x) { return sum(x, {0, 2}, keepdim); }),
                    std::vector<Tensor>{leaf({2, 3, 4})});
    CHECK_GRADCHECK(reduce_fn([keepdim](const Tensor& x) { return mean(x.transpose(0, 2), {-1}, keepdim); }),
                    std::vector<Tensor>{leaf({2, 3, 2})});
  }
  CHECK_GRADCHECK(reduce_fn([](const Tensor& x) { return sum(x); }), std::vector<Tensor>{as_leaf(leaf({3, 2}).t())});
  CHECK_GRADCHECK(reduce_fn([](const Tensor& x) { return mean(x); }), std::vector<Tensor>{leaf({3, 2})});
}

TEST_CASE("gradcheck: var and std") {
  manual_seed(11);
  for (bool keepdim : {false, true}) {
    for (bool unbiased : {true, false}) {
      CAPTURE(keepdim);
      CAPTURE(unbiased);
      CHECK_GRADCHECK(reduce_fn([=](const Tensor& x) { return var(x, {0, 2}, unbiased, keepdim); }),
                      std::vector<Tensor>{leaf({2, 3, 2})});
      CHECK_GRADCHECK(reduce_fn([=](const Tensor& x) { return ember::std(x, {-1}, unbiased, keepdim); }),
                      std::vector<Tensor>{leaf({3, 4})});
    }
  }
  CHECK_GRADCHECK(reduce_fn([](const Tensor& x) { return var(x); }), std::vector<Tensor>{as_leaf(leaf({3, 2}).t())});
  CHECK_GRADCHECK(reduce_fn([](const Tensor& x) { return ember::std(x, false); }),
                  std::vector<Tensor>{as_leaf(leaf({3, 2}).t())});
  CHECK_GRADCHECK(reduce_fn([](const Tensor& x) { return ember::std(x.slice(1, 0, std::nullopt, 2), {1}); }),
                  std::vector<Tensor>{leaf({2, 5})});
}

TEST_CASE("std of a constant group has a zero gradient, not NaN") {
  Tensor x = full({2, 3}, 2.0, kFloat64).requires_grad_();
  ember::std(x, {1}).sum().backward();
  check_close(x.grad(), zeros({2, 3}, kFloat64));
}

TEST_CASE("gradcheck: logsumexp") {
  manual_seed(12);
  for (bool keepdim : {false, true}) {
    CHECK_GRADCHECK(reduce_fn([keepdim](const Tensor& x) { return logsumexp(x, {0, 2}, keepdim); }),
                    std::vector<Tensor>{leaf({2, 3, 2})});
    CHECK_GRADCHECK(reduce_fn([keepdim](const Tensor& x) { return logsumexp(x, {-1}, keepdim); }),
                    std::vector<Tensor>{as_leaf(leaf({4, 3}).t())});
  }
  CHECK_GRADCHECK(reduce_fn([](const Tensor& x) { return logsumexp(x, {}); }), std::vector<Tensor>{leaf({2, 3})});
}

TEST_CASE("gradcheck: amax, amin, max and min") {
  manual_seed(13);
  for (bool keepdim : {false, true}) {
    CHECK_GRADCHECK(reduce_fn([keepdim](const Tensor& x) { return amax(x, {0, 2}, keepdim); }),
                    std::vector<Tensor>{leaf({2, 3, 2})});
    CHECK_GRADCHECK(reduce_fn([keepdim](const Tensor& x) { return amin(x, {0}, keepdim); }),
                    std::vector<Tensor>{as_leaf(leaf({4, 3}).t())});
    CHECK_GRADCHECK(reduce_fn([keepdim](const Tensor& x) { return max(x, 1, keepdim).values; }),
                    std::vector<Tensor>{leaf({2, 3, 2})});
    CHECK_GRADCHECK(reduce_fn([keepdim](const Tensor& x) { return min(x, -1, keepdim).values; }),
                    std::vector<Tensor>{as_leaf(leaf({4, 3}).t())});
  }
  CHECK_GRADCHECK(reduce_fn([](const Tensor& x) { return max(x); }), std::vector<Tensor>{leaf({2, 3})});
  CHECK_GRADCHECK(reduce_fn([](const Tensor& x) { return min(x.slice(0, 1, std::nullopt, 2)); }),
                  std::vector<Tensor>{leaf({5, 2})});
  CHECK_GRADCHECK(reduce_fn([](const Tensor& x) { return max(x, 0).values; }), std::vector<Tensor>{leaf({})});
}

TEST_CASE("reduction errors name the op and the operands") {
  const Tensor x = zeros({2, 3, 4});
  CHECK_THROWS_WITH_ALL(sum(x, {3}), "sum", "dim 3", "rank 3");
  CHECK_THROWS_WITH_ALL(mean(x, {-4}), "mean", "dim -4");
  CHECK_THROWS_WITH_ALL(var(x, Shape{5}), "var", "dim 5");
  CHECK_THROWS_WITH_ALL(ember::std(x, Shape{7}), "std", "dim 7");
  CHECK_THROWS_WITH_ALL(logsumexp(x, {3}), "logsumexp", "dim 3");
  CHECK_THROWS_WITH_ALL(amax(x, {3}), "amax", "dim 3");
  CHECK_THROWS_WITH_ALL(amin(x, {-9}), "amin", "dim -9");
  CHECK_THROWS_WITH_ALL(max(x, 3), "max", "dim 3");
  CHECK_THROWS_WITH_ALL(min(x, -4), "min", "dim -4");
  CHECK_THROWS_WITH_ALL(argmax(x, 3), "argmax", "dim 3");
  CHECK_THROWS_WITH_ALL(argmin(x, 3), "argmin", "dim 3");
  CHECK_THROWS_WITH_ALL(all(x, {3}), "dim 3");
  CHECK_THROWS_WITH_ALL(sum(x, {0, 0}), "sum", "dim 0", "more than once");
  CHECK_THROWS_WITH_ALL(amax(x, {1, -2}), "amax", "dim 1", "more than once");
  CHECK_THROWS_WITH_ALL(sum(ones({2}, kBool)), "sum", "bool");
  CHECK_THROWS_WITH_ALL(mean(ones({2}, kInt64)), "mean", "floating point", "int64");
  CHECK_THROWS_WITH_ALL(var(ones({2}, kInt64)), "var", "int64");
  CHECK_THROWS_WITH_ALL(ember::std(ones({2}, kInt64)), "std", "int64");
  CHECK_THROWS_WITH_ALL(logsumexp(ones({2}, kInt64), {0}), "logsumexp", "int64");
  CHECK_THROWS_WITH_ALL(amax(ones({2}, kBool), {0}), "amax", "bool");
  CHECK_THROWS_WITH_ALL(argmax(ones({2}, kBool)), "argmax", "bool");
  CHECK_THROWS_WITH_ALL(sum(Tensor()), "sum", "undefined");
  CHECK_THROWS_WITH_ALL(max(Tensor()), "max", "undefined");
}

TEST_CASE("max-like reductions of nothing throw, naming the op") {
  const Tensor empty = zeros({0, 3});
  CHECK_THROWS_WITH_ALL(max(empty), "max", "empty", "[0, 3]");
  CHECK_THROWS_WITH_ALL(min(empty), "min", "empty");
  CHECK_THROWS_WITH_ALL(argmax(empty), "argmax", "empty");
  CHECK_THROWS_WITH_ALL(argmin(empty), "argmin", "empty");
  CHECK_THROWS_WITH_ALL(amax(empty, {0}), "amax", "dim 0", "size 0");
  CHECK_THROWS_WITH_ALL(amin(empty, {}), "amin", "empty");
  CHECK_THROWS_WITH_ALL(max(empty, 0), "max", "dim 0", "size 0");
  CHECK_THROWS_WITH_ALL(argmin(empty, 0), "argmin", "dim 0", "size 0");
}

TEST_CASE("a braced dims list selects the dims overload of var and std, not unbiased") {
  const Tensor x = tensor({1.0, 2.0, 3.0, 5.0}, {2, 2});
  check_close(var(x, {0}), tensor({2.0, 4.5}, {2}));
  check_close(var(x, {1}), tensor({0.5, 2.0}, {2}));
  check_close(ember::std(x, {0}), tensor({std::sqrt(2.0), std::sqrt(4.5)}, {2}));
  check_close(var(x, {}), scalar_tensor(2.9166666666666665, kFloat64));
}

TEST_CASE("rows split over threads, and NaN far into a long row") {
  manual_seed(14);
  const Tensor rows = randn({1000, 40}, kFloat64);  // enough work to run on every thread
  check_close(amax(rows, {1}), naive_reduce(rows, {1}, false, naive_max), 0, 0);
  check_close(argmin(rows, 1), naive_reduce(rows, {1}, false, naive_argmin), 0, 0);
  check_close(max(rows, 1).indices, naive_reduce(rows, {1}, false, naive_argmax), 0, 0);
  check_close(var(rows, {1}), naive_reduce(rows, {1}, false, [](const auto& v) { return naive_var(v, true); }), 1e-9);
  check_close(logsumexp(rows, {1}), naive_reduce(rows, {1}, false, naive_logsumexp), 1e-9);
  check_close(sum(rows, {1}), naive_reduce(rows, {1}, false, naive_sum), 1e-9);

  std::vector<double> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<double>(i));
  values[517] = kNaN;
  values[800] = kNaN;
  const Tensor row = tensor(values, {1000});
  CHECK(std::isnan(max(row).item()));
  CHECK(std::isnan(amin(row, {0}).item()));
  CHECK(std::isnan(logsumexp(row, {0}).item()));
  CHECK(argmax(row).item<int64_t>() == 517);
  CHECK(argmin(row).item<int64_t>() == 517);
  const Tensor column = row.reshape({1000, 1}).expand({1000, 3}).contiguous();
  check_close(argmax(column, 0), tensor<int64_t>({517, 517, 517}, {3}), 0, 0);
}
