// bfloat16 and float16 through every CPU reduction (sum, mean, var/std, logsumexp, amax/amin,
// max/min with indices, argmax/argmin, all/any): over all dims, one dim, several, with keepdim,
// along rows and columns and on non-contiguous inputs, against the float32 reduction of the
// same rounded inputs (tests/half_reference.h); sums long enough that a 16-bit accumulator would
// stall; gradients; and errors.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "half_reference.h"

using namespace ember;
using namespace ember::testing;

namespace {

using ReduceFn = std::function<Tensor(const Tensor&)>;

struct NamedReduction {
  std::string name;
  ReduceFn fn;
};

// Each reduction over the ways of choosing dims of a [4, 6, 5] input: everything, a leading
// dim (columns: inner > 1), the last dim (rows), two dims apart (the permuted copy), and keepdim.
std::vector<NamedReduction> reductions() {
  const std::vector<std::pair<std::string, Shape>> dim_choices = {
      {"all", {}}, {"dim 0", {0}}, {"dim 1", {1}}, {"dim 2", {2}}, {"dims 0, 2", {0, 2}}};
  std::vector<NamedReduction> all;
  for (const auto& [where, dims] : dim_choices) {
    for (const bool keepdim : {false, true}) {
      const std::string suffix = " over " + where + (keepdim ? ", keepdim" : "");
      all.push_back({"sum" + suffix, [dims, keepdim](const Tensor& x) { return sum(x, dims, keepdim); }});
      all.push_back({"mean" + suffix, [dims, keepdim](const Tensor& x) { return mean(x, dims, keepdim); }});
      all.push_back({"var" + suffix, [dims, keepdim](const Tensor& x) { return var(x, dims, true, keepdim); }});
      all.push_back(
          {"var biased" + suffix, [dims, keepdim](const Tensor& x) { return var(x, dims, false, keepdim); }});
      all.push_back({"std" + suffix, [dims, keepdim](const Tensor& x) { return ember::std(x, dims, true, keepdim); }});
      all.push_back(
          {"logsumexp" + suffix, [dims, keepdim](const Tensor& x) { return logsumexp(x, dims, keepdim); }});
      all.push_back({"amax" + suffix, [dims, keepdim](const Tensor& x) { return amax(x, dims, keepdim); }});
      all.push_back({"amin" + suffix, [dims, keepdim](const Tensor& x) { return amin(x, dims, keepdim); }});
    }
  }
  all.push_back({"max", [](const Tensor& x) { return max(x); }});
  all.push_back({"min", [](const Tensor& x) { return min(x); }});
  for (const int64_t dim : {0, 1, 2}) {
    for (const bool keepdim : {false, true}) {
      const std::string suffix = " along dim " + std::to_string(dim) + (keepdim ? ", keepdim" : "");
      all.push_back({"max values" + suffix, [dim, keepdim](const Tensor& x) { return max(x, dim, keepdim).values; }});
      all.push_back({"min values" + suffix, [dim, keepdim](const Tensor& x) { return min(x, dim, keepdim).values; }});
    }
  }
  return all;
}

// Index reductions: their int64 results must match float32's exactly.
std::vector<NamedReduction> index_reductions() {
  std::vector<NamedReduction> all = {{"argmax", [](const Tensor& x) { return argmax(x); }},
                                     {"argmin", [](const Tensor& x) { return argmin(x); }}};
  for (const int64_t dim : {0, 1, 2}) {
    const std::string suffix = " along dim " + std::to_string(dim);
    all.push_back({"argmax" + suffix, [dim](const Tensor& x) { return argmax(x, dim, false); }});
    all.push_back({"argmin" + suffix, [dim](const Tensor& x) { return argmin(x, dim, true); }});
    all.push_back({"max indices" + suffix, [dim](const Tensor& x) { return max(x, dim).indices; }});
    all.push_back({"min indices" + suffix, [dim](const Tensor& x) { return min(x, dim).indices; }});
  }
  return all;
}

// The inputs every reduction runs on, in `dtype`: contiguous, a permuted (non-contiguous) view
// of the same shape, and one with ties and repeated extrema (values on a coarse grid).
std::vector<Tensor> inputs(DType dtype) {
  const Tensor contiguous_input = representable_randn({4, 6, 5}, dtype, 3.0).to(dtype);
  const Tensor permuted = representable_randn({5, 4, 6}, dtype, 3.0).to(dtype).permute({1, 2, 0});
  const Tensor ties = randint(-3, 4, {4, 6, 5}, dtype);
  return {contiguous_input, permuted, ties};
}

}  // namespace

TEST_CASE("16-bit reductions: the float32 reduction of the rounded inputs, rounded once") {
  for (const DType dtype : kHalfDTypes) {
    for (const Tensor& x : inputs(dtype)) {
      for (const NamedReduction& op : reductions()) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(op.name);
        CAPTURE(x.is_contiguous());
        const Tensor result = op.fn(x);
        CHECK(result.dtype() == dtype);
        // 0 units: the 16-bit kernels read each element as the float it is, accumulate as
        // float32's do (sums in double) and round once, where float32's round to float32.
        check_rounded(result, op.fn(x.to(kFloat32)));
      }
      for (const NamedReduction& op : index_reductions()) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(op.name);
        const Tensor indices = op.fn(x);
        CHECK(indices.dtype() == kInt64);
        CHECK(indices.to_vector<int64_t>() == op.fn(x.to(kFloat32)).to_vector<int64_t>());
      }
    }
  }
}

TEST_CASE("16-bit sums accumulate in float32 or wider: long rows and columns keep their precision") {
  // 10,000 ones: a bfloat16 running total stops at 256 (256 + 1 rounds back to 256) and a
  // float16 one at 2048; the right sum is 10,000, which float16 holds exactly and bfloat16
  // rounds to 9984 (its nearest value, 8 significant bits).
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    const double expected = full({}, 10000.0, dtype).item<double>();
    CHECK(expected == (dtype == kFloat16 ? 10000.0 : 9984.0));
    CHECK(sum(ones({10000}, dtype)).item<double>() == expected);
    // Along rows, along columns (inner > 1) and over a permuted copy.
    const Tensor grid = ones({10000, 3}, dtype);
    CHECK(sum(grid, {0}).to_vector<double>() == std::vector<double>(3, expected));
    CHECK(sum(grid.t(), {1}).to_vector<double>() == std::vector<double>(3, expected));
    CHECK(mean(grid, {0}).to_vector<double>() == std::vector<double>(3, 1.0));
    // Small terms added to a large one: each 1/256 is below half a bfloat16 step of 1, so a
    // 16-bit total would never move.
    Tensor terms = full({4097}, 1.0 / 256, dtype);
    terms = cat({ones({1}, dtype), terms}, 0);
    check_rounded(sum(terms), full({}, 1.0 + 4097.0 / 256, kFloat32));
  }
  // A float16 mean whose sum overflows float16: 100,000 ones have mean 1, not inf / inf.
  CHECK(mean(ones({100000}, kFloat16)).item<double>() == 1.0);
  CHECK(std::isinf(sum(ones({100000}, kFloat16)).item<double>()));  // the sum itself is past 65504
  CHECK(var(ones({100000}, kFloat16)).item<double>() == 0.0);
  // logsumexp of 100,000 zeros: log(100000) = 11.51, its exponentials' total is never stored.
  check_rounded(logsumexp(zeros({100000}, kFloat16), {0}), logsumexp(zeros({100000}, kFloat32), {0}));
}

TEST_CASE("16-bit reductions of special values: NaN, infinities, empty groups") {
  const Tensor special = tensor<float>({1.0f, NAN, -2.0f, INFINITY, -INFINITY, 3.0f}, {2, 3});
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = special.to(dtype);
    for (const int64_t dim : {0, 1}) {
      check_rounded(sum(x, {dim}), sum(special, {dim}));
      check_rounded(amax(x, {dim}), amax(special, {dim}));
      check_rounded(amin(x, {dim}), amin(special, {dim}));
      check_rounded(logsumexp(x, {dim}), logsumexp(special, {dim}));
      CHECK(argmax(x, dim).to_vector<int64_t>() == argmax(special, dim).to_vector<int64_t>());
      CHECK(argmin(x, dim).to_vector<int64_t>() == argmin(special, dim).to_vector<int64_t>());
    }
    // A group of -inf only: logsumexp is -inf, and its gradient 0 rather than NaN.
    Tensor minus_inf = full({2, 3}, -INFINITY, dtype);
    minus_inf.requires_grad_(true);
    const Tensor result = logsumexp(minus_inf, {1});
    CHECK(result.to_vector<double>() == std::vector<double>(2, -INFINITY));
    sum(result).backward();
    CHECK(minus_inf.grad().to_vector<double>() == std::vector<double>(6, 0.0));
    // Reducing an empty dim: the sum of nothing is 0, its logsumexp -inf.
    CHECK(sum(zeros({0, 2}, dtype), {0}).to_vector<double>() == std::vector<double>(2, 0.0));
    CHECK(logsumexp(zeros({0, 2}, dtype), {0}).to_vector<double>() == std::vector<double>(2, -INFINITY));
  }
}

TEST_CASE("16-bit all and any") {
  const Tensor x = tensor<float>({0.0f, 1.0f, 0.0f, 0.0f, 1e-3f, -0.0f, 2.0f, NAN, 5.0f}, {3, 3});
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor x16 = x.to(dtype);
    CHECK(all(x16).item<bool>() == all(x).item<bool>());
    CHECK(any(x16).item<bool>() == any(x).item<bool>());
    for (const int64_t dim : {0, 1}) {
      CHECK(all(x16, {dim}).to_vector<bool>() == all(x, {dim}).to_vector<bool>());
      CHECK(any(x16, {dim}, true).to_vector<bool>() == any(x, {dim}, true).to_vector<bool>());
    }
    CHECK(all(x16.t(), {1}).to_vector<bool>() == all(x.t(), {1}).to_vector<bool>());
  }
}

TEST_CASE("16-bit reductions: gradients against float32's") {
  for (const DType dtype : kHalfDTypes) {
    const Tensor x = representable_randn({4, 6, 5}, dtype);
    // A 16-bit backward is a composition of 16-bit ops: mean's is one division; var's the
    // centring, a product and a scale; std's a division more; logsumexp's a subtraction, an
    // exponential and a product. Each rounds once, and their intermediates are within a few
    // times the gradient's largest magnitude, so 8 unit roundoffs of it bound the error.
    const std::vector<std::pair<std::string, ReduceFn>> differentiable = {
        {"sum", [](const Tensor& t) { return sum(t, {1}); }},
        {"sum all", [](const Tensor& t) { return sum(t); }},
        {"mean", [](const Tensor& t) { return mean(t, {0, 2}); }},
        {"var", [](const Tensor& t) { return var(t, {1}); }},
        {"std", [](const Tensor& t) { return ember::std(t, {2}, false); }},
        {"logsumexp", [](const Tensor& t) { return logsumexp(t, {2}); }},
        {"amax", [](const Tensor& t) { return amax(t, {1}); }},
        {"amin all", [](const Tensor& t) { return amin(t, {}); }},
        {"max along dim", [](const Tensor& t) { return max(t, 0).values; }},
        {"min along dim keepdim", [](const Tensor& t) { return min(t, 2, true).values; }},
    };
    for (const auto& [name, fn] : differentiable) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(name);
      const Tensor weight = representable_randn(fn(x).sizes(), dtype);
      check_gradient_rounded(fn, x, weight, dtype, 8);
    }
  }
}

TEST_CASE("16-bit reductions: errors name the op and the dtype") {
  const Tensor flags = ones({3}, kBool);
  CHECK_THROWS_WITH_ALL(sum(flags), "sum", "bool");
  CHECK_THROWS_WITH_ALL(amax(flags, {0}), "amax", "bool");
  CHECK_THROWS_WITH_ALL(argmax(flags), "argmax", "bool");
  CHECK_THROWS_WITH_ALL(mean(ones({3}, kInt64)), "mean", "int64");
  CHECK_THROWS_WITH_ALL(var(ones({3}, kInt64)), "var", "int64");
  CHECK_THROWS_WITH_ALL(logsumexp(ones({3}, kInt64), {0}), "logsumexp", "int64");
  CHECK_THROWS_WITH_ALL(max(zeros({0}, kBFloat16)), "max", "empty");
  CHECK_THROWS_WITH_ALL(sum(ones({2, 3}, kFloat16), {2}), "sum", "dim");
}
