// Parity of the reductions on CUDA against the CPU: sum, mean, var, std, logsumexp, amax/amin,
// max/min with indices, argmax/argmin, any/all, over every dim pattern (all dims, leading,
// trailing, several, non-contiguous input, keepdim), forward and backward, and at sizes that
// exercise each of the kernels' strategies (a block per output, a thread per output, several blocks
// per output for few, long outputs), in float32 and float64 and in bfloat16 and float16.
#include <cmath>

#include "helpers.h"
#include "parity.h"

using namespace ember;
using namespace ember::testing::cuda;
using ember::testing::as_leaf;

namespace {

double tolerance_for(DType dtype) { return dtype == kFloat64 ? 1e-12 : kReductionTolerance; }

struct DimsCase {
  Shape dims;
  bool keepdim;
  bool transposed;  // reduce a transposed (non-contiguous) view
};

const std::vector<DimsCase> kDimsCases = {{{}, false, false},      {{0}, false, false}, {{-1}, true, false},
                                          {{1}, false, true},      {{0, 2}, true, false}, {{0, 2}, false, true},
                                          {{1, 2}, false, false}};

std::string describe(const DimsCase& c) {
  std::string text = "dims " + shape_str(c.dims);
  if (c.keepdim) text += " keepdim";
  if (c.transposed) text += " transposed";
  return text;
}

Tensor view_of(const Tensor& x, const DimsCase& c) { return c.transposed ? x.transpose(0, 2) : x; }

// sum, mean, var (unbiased), std (biased) and logsumexp over a dims case, each with its name.
std::vector<std::pair<std::string, std::function<Tensor(const Inputs&)>>> reductions_over(const DimsCase& c) {
  return {{"sum", [c](const Inputs& in) { return sum(view_of(in[0], c), c.dims, c.keepdim); }},
          {"mean", [c](const Inputs& in) { return mean(view_of(in[0], c), c.dims, c.keepdim); }},
          {"var", [c](const Inputs& in) { return var(view_of(in[0], c), c.dims, true, c.keepdim); }},
          {"std", [c](const Inputs& in) { return ember::std(view_of(in[0], c), c.dims, false, c.keepdim); }},
          {"logsumexp", [c](const Inputs& in) { return logsumexp(view_of(in[0], c), c.dims, c.keepdim); }}};
}

}  // namespace

TEST_CASE("sum, mean, var, std and logsumexp match the CPU over every dim pattern, with gradients") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = tolerance_for(dtype);
    const Tensor x = as_leaf(randn({6, 7, 9}, dtype));
    for (const DimsCase& c : kDimsCases) {
      for (const auto& [name, op] : reductions_over(c)) {
        check_op_parity(op, {x}, tolerance, name + " " + describe(c) + " " + std::string(dtype_name(dtype)));
      }
    }
  }
}

TEST_CASE("amax, amin, max and min with indices, argmax and argmin match the CPU") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    const bool floating = is_floating_point(dtype);
    const Tensor values = floating ? randn({6, 7, 9}, dtype) : randint(-20, 20, {6, 7, 9});  // int64: many ties
    const Tensor x = floating ? as_leaf(values) : values;
    for (const DimsCase& c : kDimsCases) {
      const std::string name = describe(c) + " " + std::string(dtype_name(dtype));
      check_op_parity([c](const Inputs& in) { return amax(view_of(in[0], c), c.dims, c.keepdim); }, {x}, 0.0,
                      "amax " + name);
      check_op_parity([c](const Inputs& in) { return amin(view_of(in[0], c), c.dims, c.keepdim); }, {x}, 0.0,
                      "amin " + name);
    }
    for (int64_t dim : {0, 1, -1}) {
      for (bool keepdim : {false, true}) {
        const std::string name = "dim " + std::to_string(dim) + " " + std::string(dtype_name(dtype));
        check_op_parity([dim, keepdim](const Inputs& in) { return max(in[0], dim, keepdim).values; }, {x}, 0.0,
                        "max values " + name);
        check_op_parity([dim, keepdim](const Inputs& in) { return min(in[0].transpose(0, 1), dim, keepdim).values; },
                        {x}, 0.0, "min values transposed " + name);
        const Tensor gpu_x = values.to(kGPU);
        check_parity(max(gpu_x, dim, keepdim).indices, max(values, dim, keepdim).indices, 0.0, "max indices " + name);
        check_parity(argmax(gpu_x, dim, keepdim), argmax(values, dim, keepdim), 0.0, "argmax " + name);
        check_parity(argmin(gpu_x.transpose(0, 2), dim, keepdim), argmin(values.transpose(0, 2), dim, keepdim), 0.0,
                     "argmin transposed " + name);
      }
    }
    check_parity(argmax(values.to(kGPU)), argmax(values), 0.0, "argmax of all");
    check_parity(argmin(values.to(kGPU)), argmin(values), 0.0, "argmin of all");
    check_parity(max(values.to(kGPU)), max(values), 0.0, "max of all");
  }
}

TEST_CASE("extrema keep the CPU's rules for ties, NaN and infinities") {
  const Tensor x = tensor<double>({3.0, 1.0, 3.0, NAN, 2.0, NAN, -INFINITY, -INFINITY, 5.0, 5.0, INFINITY, 0.0}, {3, 4});
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor host = x.to(dtype), device = x.to(dtype).to(kGPU);
    for (int64_t dim : {0, 1}) {
      check_parity(argmax(device, dim), argmax(host, dim), 0.0, "argmax ties and NaN");
      check_parity(argmin(device, dim), argmin(host, dim), 0.0, "argmin ties and NaN");
      check_parity(amax(device, {dim}), amax(host, {dim}), 0.0, "amax NaN");
      check_parity(amin(device, {dim}), amin(host, {dim}), 0.0, "amin NaN");
      check_parity(logsumexp(device, {dim}), logsumexp(host, {dim}), 1e-6, "logsumexp with infinities");
    }
  }
  const Tensor all_minus_inf = full({2, 3}, -INFINITY);
  check_parity(logsumexp(all_minus_inf.to(kGPU), {1}), logsumexp(all_minus_inf, {1}), 0.0, "logsumexp of -inf");
}

TEST_CASE("reductions of broadcast, strided and single-element inputs match the CPU") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = tolerance_for(dtype);
    const std::string name = std::string(dtype_name(dtype));
    // expand gives stride 0 along dim 1; slice a step of 3 along dim 2.
    const Tensor x = as_leaf(randn({5, 1, 9}, dtype));
    check_op_parity([](const Inputs& in) { return sum(in[0].expand({5, 4, 9}), {0, 1}); }, {x}, tolerance,
                    "sum of an expanded input " + name);
    check_op_parity([](const Inputs& in) { return mean(in[0].expand({5, 4, 9}).slice(2, 1, 9, 3), {2}); }, {x},
                    tolerance, "mean of an expanded, sliced input " + name);
    check_op_parity([](const Inputs& in) { return var(in[0].expand({5, 4, 9}), {0}, true, false); }, {x}, tolerance,
                    "var of an expanded input " + name);
    check_op_parity([](const Inputs& in) { return logsumexp(in[0].expand({5, 4, 9}), {1, 2}); }, {x}, tolerance,
                    "logsumexp of an expanded input " + name);
    check_op_parity([](const Inputs& in) { return amax(in[0].expand({5, 4, 9}).slice(2, 0, 9, 2), {0}); }, {x},
                    tolerance, "amax of an expanded, sliced input " + name);
    // One element per output: N - correction = 0 gives 0 / 0 = NaN on both devices.
    const Tensor single = as_leaf(randn({3, 1}, dtype));
    check_op_parity([](const Inputs& in) { return var(in[0], {1}, true, false); }, {single}, tolerance,
                    "var of one element " + name);
    check_op_parity([](const Inputs& in) { return logsumexp(in[0], {1}); }, {single}, tolerance,
                    "logsumexp of one element " + name);
    check_parity(argmax(single.detach().to(kGPU), 1), argmax(single.detach(), 1), 0.0, "argmax of one element");
  }
}

TEST_CASE("any, all and int64 sums match the CPU") {
  const Tensor integers = randint(-3, 3, {5, 8});
  for (const Shape& dims : {Shape{}, Shape{0}, Shape{1}}) {
    check_parity(sum(integers.to(kGPU), dims), sum(integers, dims), 0.0, "sum int64");
    check_parity(any(integers.to(kGPU), dims), any(integers, dims), 0.0, "any");
    check_parity(all(integers.to(kGPU), dims), all(integers, dims), 0.0, "all");
  }
}

TEST_CASE("large reductions cover both kernel strategies and match the CPU") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  // One long row (a block per output), rows (a block per output), many columns (a thread per
  // output), few long columns (a block per output, strided), and an empty reduced dim.
  const Tensor long_row = randn({3000000});
  check_parity(sum(long_row.to(kGPU)), sum(long_row), kReductionTolerance, "sum of 3M");
  check_parity(var(long_row.to(kGPU)), var(long_row), kReductionTolerance, "var of 3M");
  check_parity(argmax(long_row.to(kGPU)), argmax(long_row), 0.0, "argmax of 3M");
  const Tensor rows = randn({5000, 300});
  check_parity(logsumexp(rows.to(kGPU), {1}), logsumexp(rows, {1}), kReductionTolerance, "logsumexp of rows");
  check_parity(sum(rows.to(kGPU), {1}), sum(rows, {1}), kReductionTolerance, "sum of rows");
  const Tensor columns = randn({300, 5000});
  check_parity(sum(columns.to(kGPU), {0}), sum(columns, {0}), kReductionTolerance, "sum of 5000 columns");
  check_parity(amax(columns.to(kGPU), {0}), amax(columns, {0}), 0.0, "amax of 5000 columns");
  check_parity(var(columns.to(kGPU), {0}), var(columns, {0}), kReductionTolerance, "var of 5000 columns");
  const Tensor few_columns = randn({100000, 3});
  check_parity(sum(few_columns.to(kGPU), {0}), sum(few_columns, {0}), kReductionTolerance, "sum of 3 long columns");
  check_parity(argmin(few_columns.to(kGPU), 0), argmin(few_columns, 0), 0.0, "argmin of 3 long columns");
  // A bias's gradient: all rows of a batch summed, by 3 groups of columns (the last 0 to 31
  // short) and 32 slices of rows (cuda/common/column_sums.cuh).
  for (const DType dtype : {kFloat32, kFloat64}) {
    const Tensor batch = as_leaf(randn({8, 257, 96}, dtype));
    check_op_parity([](const Inputs& in) { return sum(in[0], {0, 1}); }, {batch}, tolerance_for(dtype),
                    "sum over a batch's rows " + std::string(dtype_name(dtype)));
    check_op_parity([](const Inputs& in) { return sum(in[0].narrow(2, 0, 70), {0, 1}); }, {batch},
                    tolerance_for(dtype), "sum over a batch's rows, 70 columns " + std::string(dtype_name(dtype)));
  }
  const Tensor empty_dim = randn({4, 0, 3});
  check_parity(sum(empty_dim.to(kGPU), {1}), sum(empty_dim, {1}), 0.0, "sum over an empty dim");
  check_parity(logsumexp(empty_dim.to(kGPU), {1}), logsumexp(empty_dim, {1}), 0.0, "logsumexp over an empty dim");
}

TEST_CASE("reductions with few, long outputs split over many blocks and match the CPU") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  for (DType dtype : {kFloat32, kFloat64}) {
    // Millions of terms, summed in another order than the CPU's: float64 is held to 1e-10.
    const double tolerance = dtype == kFloat64 ? 1e-10 : kReductionTolerance;
    // logsumexp's gradient exp(x - result) carries the result's absolute error as a relative
    // one in every element. Both devices add the float32 exps in double, so each result is its
    // float64 value rounded once, within 2^-20 ~ 1e-6 near 16; with the rounding of x - result
    // and float32 exp, each device's gradient is within ~2e-6 of exact per element (tests/
    // test_reduce.cpp), so 1e-5 has margin, while a float32 running total of these millions of
    // terms drifts the result, and the gradient, by 1e-4 to 1e-3.
    const double logsumexp_tolerance = dtype == kFloat64 ? 1e-10 : 1e-5;
    const std::string name = std::string(dtype_name(dtype));
    // One output of 5M elements, and 4 outputs of 3M elements each: over the last dim (rows),
    // over dim 0 of the transposed view and of a contiguous [3M, 4] (columns), and over all.
    // Ties for the extrema sit in different blocks' slices, so the first occurrence must win
    // across blocks.
    const Tensor whole = randn({5000000}, dtype);
    for (int64_t at : {1234567, 4000001}) whole.select(0, at).fill_(10.0);
    for (int64_t at : {300, 2500000}) whole.select(0, at).fill_(-10.0);
    const Tensor rows = randn({4, 3000000}, dtype);
    for (int64_t at : {100, 2999999}) rows.select(1, at).fill_(10.0);
    for (int64_t at : {1700000, 2000000}) rows.select(1, at).fill_(-10.0);
    const Tensor columns = randn({3000000, 4}, dtype);

    const Tensor whole_leaf = as_leaf(whole), rows_leaf = as_leaf(rows), columns_leaf = as_leaf(columns);
    check_op_parity([](const Inputs& in) { return sum(in[0]); }, {whole_leaf}, tolerance, "sum of 5M " + name);
    check_op_parity([](const Inputs& in) { return mean(in[0]); }, {whole_leaf}, tolerance, "mean of 5M " + name);
    check_op_parity([](const Inputs& in) { return var(in[0]); }, {whole_leaf}, tolerance, "var of 5M " + name);
    check_op_parity([](const Inputs& in) { return logsumexp(in[0], {0}); }, {whole_leaf}, logsumexp_tolerance,
                    "logsumexp of 5M " + name);
    check_op_parity([](const Inputs& in) { return sum(in[0], {1}); }, {rows_leaf}, tolerance,
                    "sum of 4 rows of 3M " + name);
    check_op_parity([](const Inputs& in) { return mean(in[0], {1}); }, {rows_leaf}, tolerance,
                    "mean of 4 rows of 3M " + name);
    check_op_parity([](const Inputs& in) { return var(in[0], {1}, false, true); }, {rows_leaf}, tolerance,
                    "var of 4 rows of 3M " + name);
    check_op_parity([](const Inputs& in) { return logsumexp(in[0], {1}); }, {rows_leaf}, logsumexp_tolerance,
                    "logsumexp of 4 rows of 3M " + name);
    check_op_parity([](const Inputs& in) { return sum(in[0]); }, {rows_leaf}, tolerance, "sum of all 12M " + name);
    check_op_parity([](const Inputs& in) { return var(in[0].transpose(0, 1), {0}); }, {rows_leaf}, tolerance,
                    "var of 4 transposed columns of 3M " + name);
    check_op_parity([](const Inputs& in) { return sum(in[0], {0}); }, {columns_leaf}, tolerance,
                    "sum of 4 columns of 3M " + name);
    check_op_parity([](const Inputs& in) { return logsumexp(in[0], {0}); }, {columns_leaf}, logsumexp_tolerance,
                    "logsumexp of 4 columns of 3M " + name);

    const Tensor gpu_whole = whole.to(kGPU), gpu_rows = rows.to(kGPU), gpu_columns = columns.to(kGPU);
    check_parity(amax(gpu_whole, {0}), amax(whole, {0}), 0.0, "amax of 5M " + name);
    check_parity(amin(gpu_whole, {0}), amin(whole, {0}), 0.0, "amin of 5M " + name);
    check_parity(argmax(gpu_whole), argmax(whole), 0.0, "argmax of 5M with ties " + name);
    check_parity(argmin(gpu_whole), argmin(whole), 0.0, "argmin of 5M with ties " + name);
    check_parity(argmax(gpu_rows, 1), argmax(rows, 1), 0.0, "argmax of 4 rows of 3M with ties " + name);
    check_parity(argmin(gpu_rows, 1), argmin(rows, 1), 0.0, "argmin of 4 rows of 3M with ties " + name);
    check_parity(argmax(gpu_rows.transpose(0, 1), 0), argmax(rows.transpose(0, 1), 0), 0.0,
                 "argmax of 4 transposed columns of 3M with ties " + name);
    check_parity(max(gpu_rows, 1).values, max(rows, 1).values, 0.0, "max of 4 rows of 3M " + name);
    check_parity(argmin(gpu_columns, 0), argmin(columns, 0), 0.0, "argmin of 4 columns of 3M " + name);
    check_parity(amax(gpu_columns, {0}), amax(columns, {0}), 0.0, "amax of 4 columns of 3M " + name);

    // NaN: the first one wins argmax and argmin, and amax, sum and logsumexp are NaN.
    const Tensor with_nan = whole.clone();
    for (int64_t at : {3000000, 4500000}) with_nan.select(0, at).fill_(NAN);
    const Tensor gpu_with_nan = with_nan.to(kGPU);
    check_parity(argmax(gpu_with_nan), argmax(with_nan), 0.0, "argmax of 5M with NaN " + name);
    check_parity(argmin(gpu_with_nan), argmin(with_nan), 0.0, "argmin of 5M with NaN " + name);
    check_parity(amax(gpu_with_nan, {0}), amax(with_nan, {0}), 0.0, "amax of 5M with NaN " + name);
    check_parity(sum(gpu_with_nan), sum(with_nan), 0.0, "sum of 5M with NaN " + name);
    check_parity(logsumexp(gpu_with_nan, {0}), logsumexp(with_nan, {0}), 0.0, "logsumexp of 5M with NaN " + name);
    check_parity(var(gpu_with_nan), var(with_nan), 0.0, "var of 5M with NaN " + name);
  }
  // int64: a few thousand copies of each value, so the extrema are tied all over the range, and
  // sums are exact; any and all count their nonzeros with the same int64 sum.
  const Tensor integers = randint(-1000, 1000, {5000000});
  const Tensor gpu_integers = integers.to(kGPU);
  check_parity(sum(gpu_integers), sum(integers), 0.0, "sum of 5M int64");
  check_parity(argmax(gpu_integers), argmax(integers), 0.0, "argmax of 5M int64");
  check_parity(argmin(gpu_integers), argmin(integers), 0.0, "argmin of 5M int64");
  check_parity(amax(gpu_integers, {0}), amax(integers, {0}), 0.0, "amax of 5M int64");
  check_parity(any(gpu_integers), any(integers), 0.0, "any of 5M");
  check_parity(all(gpu_integers), all(integers), 0.0, "all of 5M");
}

// --- bfloat16 and float16 -----------------------------------------------------------------------
// Read as float and accumulated in double on both devices, so each result is its float64 value
// rounded once (to float32, then to 16 bits): check_half_op_parity (parity.h) compares with the
// CPU and with the float32 reduction on the GPU, rounded. The extrema pick elements: exact.

TEST_CASE("sum, mean, var, std and logsumexp match in bfloat16 and float16 over every dim pattern") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  const Tensor x = as_leaf(randn({6, 7, 9}));
  for (const DType dtype : kHalfDTypes) {
    for (const DimsCase& c : kDimsCases) {
      for (const auto& [name, op] : reductions_over(c)) check_half_op_parity(op, {x}, dtype, name + " " + describe(c));
    }
  }
}

TEST_CASE("extrema and their positions match exactly in bfloat16 and float16, ties and NaN included") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  const Tensor specials =
      tensor<double>({3.0, 1.0, 3.0, NAN, 2.0, NAN, -INFINITY, -INFINITY, 5.0, 5.0, INFINITY, 0.0}, {3, 4});
  for (const DType dtype : kHalfDTypes) {
    const std::string name(dtype_name(dtype));
    // Rounded to 8 (11) significant bits, normal draws tie often: the first occurrence must win.
    const Tensor values = randn({6, 7, 9}).to(dtype), gpu_values = values.to(kGPU);
    for (const DimsCase& c : kDimsCases) {
      check_parity(amax(view_of(gpu_values, c), c.dims, c.keepdim), amax(view_of(values, c), c.dims, c.keepdim), 0.0,
                   "amax " + describe(c) + " " + name);
      check_parity(amin(view_of(gpu_values, c), c.dims, c.keepdim), amin(view_of(values, c), c.dims, c.keepdim), 0.0,
                   "amin " + describe(c) + " " + name);
    }
    for (int64_t dim : {0, 1, -1}) {
      check_parity(argmax(gpu_values, dim), argmax(values, dim), 0.0, "argmax " + name);
      check_parity(argmin(gpu_values.transpose(0, 2), dim), argmin(values.transpose(0, 2), dim), 0.0,
                   "argmin transposed " + name);
      check_parity(max(gpu_values, dim).values, max(values, dim).values, 0.0, "max values " + name);
    }
    // The gradient of max flows to the chosen element only.
    check_half_op_parity([](const Inputs& in) { return max(in[0], 1).values; }, {as_leaf(randn({6, 7, 9}))}, dtype,
                         "max with gradient");
    const Tensor host = specials.to(dtype), device = host.to(kGPU);
    for (int64_t dim : {0, 1}) {
      check_parity(argmax(device, dim), argmax(host, dim), 0.0, "argmax ties and NaN " + name);
      check_parity(argmin(device, dim), argmin(host, dim), 0.0, "argmin ties and NaN " + name);
      check_parity(amax(device, {dim}), amax(host, {dim}), 0.0, "amax NaN " + name);
      check_parity(logsumexp(device, {dim}), logsumexp(host, {dim}), half_tolerance(dtype),
                   "logsumexp with infinities " + name);
    }
  }
}

TEST_CASE("bfloat16 and float16 reductions split over many blocks and over columns match the CPU") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  const Tensor whole = randn({3000000}), rows = randn({3, 1000000}), columns = randn({300, 5000});
  for (const DType dtype : kHalfDTypes) {
    const std::string name(dtype_name(dtype));
    check_half_op_parity([](const Inputs& in) { return sum(in[0]); }, {as_leaf(whole)}, dtype, "sum of 3M");
    check_half_op_parity([](const Inputs& in) { return var(in[0]); }, {as_leaf(whole)}, dtype, "var of 3M");
    check_half_op_parity([](const Inputs& in) { return logsumexp(in[0], {1}); }, {as_leaf(rows)}, dtype,
                         "logsumexp of 3 rows of 1M");
    check_half_op_parity([](const Inputs& in) { return sum(in[0], {0}); }, {as_leaf(columns)}, dtype,
                         "sum of 5000 columns");
    const Tensor host = whole.to(dtype), device = host.to(kGPU);
    check_parity(argmax(device), argmax(host), 0.0, "argmax of 3M " + name);
    check_parity(argmin(device), argmin(host), 0.0, "argmin of 3M " + name);
    check_parity(amax(rows.to(dtype).to(kGPU), {1}), amax(rows.to(dtype), {1}), 0.0, "amax of 3 rows of 1M " + name);
  }
}
