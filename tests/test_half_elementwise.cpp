// bfloat16 and float16 through the CPU elementwise ops: binary arithmetic and predicates, unary
// ops, clamp, where and the triangles, the index_add and scatter_add of the indexing backwards,
// the factories, in-place ops, cat/stack and sort, each against the float32 op on the same
// rounded inputs (tests/half_reference.h), their gradients likewise, and their errors.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "half_reference.h"

using namespace ember;
using namespace ember::testing;

namespace {

using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;
using UnaryFn = std::function<Tensor(const Tensor&)>;

struct NamedBinary {
  const char* name;
  BinaryFn fn;
  bool positive_left = false;  // pow is taken on a positive base, so that it stays real
};

const std::vector<NamedBinary> kArithmetic = {
    {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
    {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
    {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
    {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
    {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
    {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
    {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, true},
};

const std::vector<NamedBinary> kPredicates = {
    {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
    {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
    {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
    {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); }},
    {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
    {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }},
    {"logical_and", [](const Tensor& a, const Tensor& b) { return logical_and(a, b); }},
    {"logical_or", [](const Tensor& a, const Tensor& b) { return logical_or(a, b); }},
};

// Operand pairs of `dtype`: equal shapes, a broadcast row and column, a scalar, zeros, and a
// transposed (non-contiguous) operand. Some elements of b repeat a's, so that the predicates
// see ties and maximum/minimum see equal operands.
std::vector<std::pair<Tensor, Tensor>> operand_pairs(DType dtype) {
  const Tensor a = representable_randn({6, 5}, dtype);
  Tensor b = representable_randn({6, 5}, dtype);
  b = where(lt(representable_randn({6, 5}, dtype), -0.5), a, b);
  const Tensor zeros_and_values = mul(a, gt(a, 0.0).to(kFloat32));  // logical ops need zeros
  const std::vector<std::pair<Tensor, Tensor>> pairs = {{a, b},
                                                        {a, representable_randn({5}, dtype)},
                                                        {representable_randn({6, 1}, dtype), b},
                                                        {a, representable_randn({}, dtype)},
                                                        {zeros_and_values, b}};
  std::vector<std::pair<Tensor, Tensor>> converted;
  for (const auto& [left, right] : pairs) converted.emplace_back(left.to(dtype), right.to(dtype));
  converted.emplace_back(representable_randn({5, 6}, dtype).to(dtype).t(), b.to(dtype));
  return converted;
}

// The left operand pow takes: |a| + 1/2, rounded to a's dtype.
Tensor positive(const Tensor& a) {
  return add(abs(a.to(kFloat32)), 0.5).to(a.dtype());
}

// A bool result of the 16-bit op must equal the float32 op's exactly: both compare the same
// values.
void check_same_bools(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.dtype() == kBool);
  REQUIRE(actual.sizes() == expected.sizes());
  CHECK(actual.to_vector<bool>() == expected.to_vector<bool>());
}

}  // namespace

TEST_CASE("16-bit binary arithmetic: the float32 op on the rounded inputs, rounded once") {
  for (const DType dtype : kHalfDTypes) {
    for (const auto& [a, b] : operand_pairs(dtype)) {
      for (const NamedBinary& op : kArithmetic) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(op.name);
        const Tensor left = op.positive_left ? positive(a) : a;
        const Tensor result = op.fn(left, b);
        CHECK(result.dtype() == dtype);
        // 0 units: both compute the same float32 value, then it is rounded once.
        check_rounded(result, op.fn(left.to(kFloat32), b.to(kFloat32)));
      }
    }
  }
}

TEST_CASE("16-bit binary ops: scalars take the tensor's dtype, and infinities and NaN behave as in float32") {
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor a = representable_randn({7}, dtype);
    const Tensor a16 = a.to(dtype);
    // The scalar is rounded to the tensor's dtype first (elementwise.h: a scalar operand takes
    // the tensor's dtype), so the reference uses that rounded value.
    const double tenth = full({}, 0.1, dtype).item<double>();
    check_rounded(add(a16, 0.1), add(a, tenth));
    check_rounded(mul(a16, 0.1), mul(a, tenth));
    check_rounded(sub(a16, 0.1), sub(a, tenth));
    check_rounded(div(a16, 0.1), div(a, tenth));
    check_rounded(2.0 / a16, 2.0 / a);
    check_rounded(pow(abs(a16), 1.5), pow(abs(a), 1.5));
    check_rounded(pow(a16, 2.0), pow(a, 2.0));
    check_rounded(pow(2.0, a16), pow(2.0, a));
    check_rounded(-a16, -a);

    const Tensor special = tensor<float>({INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1.0f}, {6});
    const Tensor other = tensor<float>({1.0f, NAN, 2.0f, 0.0f, INFINITY, NAN}, {6});
    for (const NamedBinary& op : kArithmetic) {
      if (op.positive_left) continue;
      CAPTURE(op.name);
      check_rounded(op.fn(special.to(dtype), other.to(dtype)), op.fn(special, other));
    }
    for (const NamedBinary& op : kPredicates) {
      CAPTURE(op.name);
      check_same_bools(op.fn(special.to(dtype), other.to(dtype)), op.fn(special, other));
    }
  }
  // Past float16's largest value a product overflows to infinity where float32 does not.
  CHECK(std::isinf(mul(full({}, 300.0, kFloat16), 300.0).item<double>()));
  CHECK(mul(full({}, 300.0, kBFloat16), 300.0).item<double>() == 90112.0);  // 90000 rounded to 8 bits
}

TEST_CASE("16-bit predicates and logical ops give the float32 op's bools") {
  for (const DType dtype : kHalfDTypes) {
    for (const auto& [a, b] : operand_pairs(dtype)) {
      for (const NamedBinary& op : kPredicates) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(op.name);
        check_same_bools(op.fn(a, b), op.fn(a.to(kFloat32), b.to(kFloat32)));
      }
    }
    const Tensor a = operand_pairs(dtype)[4].first;
    check_same_bools(logical_not(a), logical_not(a.to(kFloat32)));
    check_same_bools(gt(a, 0.25), gt(a.to(kFloat32), 0.25));  // 0.25 is representable in both formats
  }
}

TEST_CASE("16-bit binary ops: gradients against float32's, broadcasting included") {
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor a = representable_randn({4, 5}, dtype);
    const Tensor row = representable_randn({5}, dtype);
    const Tensor weight = representable_randn({4, 5}, dtype);
    const Tensor base = positive(a.to(dtype)).to(kFloat32);
    for (const NamedBinary& op : kArithmetic) {
      CAPTURE(op.name);
      const Tensor left = op.positive_left ? base : a;
      // As the left operand and as the broadcast right one (whose gradient sums 4 rows). The
      // 16-bit backward rounds after each of its few ops (pow's: b a^(b-1), a^b log a): 8
      // unit roundoffs of the gradient's largest magnitude bound them with room to spare.
      check_gradient_rounded([&](const Tensor& x) { return op.fn(x, row.to(x.dtype())); }, left, weight, dtype, 8);
      check_gradient_rounded([&](const Tensor& x) { return op.fn(left.to(x.dtype()), x); }, row, weight, dtype, 8);
    }
    check_gradient_rounded([](const Tensor& x) { return pow(x, 3.0); }, a, weight, dtype, 8);
    check_gradient_rounded([](const Tensor& x) { return pow(x, 2.0); }, a, weight, dtype, 8);
    // maximum against itself: every element ties, and each operand gets half the gradient.
    check_gradient_rounded([](const Tensor& x) { return maximum(x, x); }, a, weight, dtype, 0);
  }
}

namespace {

struct NamedUnary {
  const char* name;
  UnaryFn fn;
  bool positive_input;  // log, sqrt and rsqrt are taken on |x| + 0.25
};

const std::vector<NamedUnary> kUnary = {
    {"neg", [](const Tensor& x) { return neg(x); }, false},
    {"abs", [](const Tensor& x) { return abs(x); }, false},
    {"exp", [](const Tensor& x) { return exp(x); }, false},
    {"log", [](const Tensor& x) { return log(x); }, true},
    {"sqrt", [](const Tensor& x) { return sqrt(x); }, true},
    {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, true},
    {"sin", [](const Tensor& x) { return sin(x); }, false},
    {"cos", [](const Tensor& x) { return cos(x); }, false},
    {"tanh", [](const Tensor& x) { return tanh(x); }, false},
    {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, false},
    {"relu", [](const Tensor& x) { return relu(x); }, false},
    {"erf", [](const Tensor& x) { return erf(x); }, false},
    {"gelu", [](const Tensor& x) { return gelu(x); }, false},
    {"gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); }, false},
};

Tensor unary_input(const Tensor& x, const NamedUnary& op) {
  return op.positive_input ? add(abs(x), 0.25) : x;
}

}  // namespace

TEST_CASE("16-bit unary ops: the float32 op on the rounded inputs, rounded once, contiguous or not") {
  for (const DType dtype : kHalfDTypes) {
    // Long enough for the vectorised loops, transposed for the strided one.
    const Tensor base = representable_randn({33, 17}, dtype, 2.0);
    for (const NamedUnary& op : kUnary) {
      const Tensor input = unary_input(base, op).to(dtype);
      for (const Tensor& x : {input, input.t()}) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(op.name);
        const Tensor result = op.fn(x);
        CHECK(result.dtype() == dtype);
        check_rounded(result, op.fn(x.to(kFloat32)));  // 0 units: the same float32 functions, one rounding
      }
    }
    // e rounded to 8 or to 11 significant bits is 2.71875 either way.
    CHECK(exp(ones({}, dtype)).item<double>() == 2.71875);
    // exp past float16's range is infinity in float16 and finite in bfloat16.
    const Tensor big = tensor<float>({12.0f, -20.0f, 88.0f}, {3});
    check_rounded(exp(big.to(dtype)), exp(big));
  }
}

TEST_CASE("16-bit isfinite, isnan, abs and relu of the special values") {
  const Tensor special = tensor<float>({INFINITY, -INFINITY, NAN, 0.0f, -2.5f, 65504.0f}, {6});
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    check_same_bools(isfinite(special.to(dtype)), isfinite(special));
    check_same_bools(isnan(special.to(dtype)), isnan(special));
    check_rounded(abs(special.to(dtype)), abs(special));
    check_rounded(relu(special.to(dtype)), relu(special));
  }
}

TEST_CASE("16-bit unary ops: gradients against float32's") {
  for (const DType dtype : kHalfDTypes) {
    const Tensor x = representable_randn({5, 7}, dtype);
    const Tensor weight = representable_randn({5, 7}, dtype);
    for (const NamedUnary& op : kUnary) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(op.name);
      // Derivatives written as 16-bit ops (1 - y^2, 0.5 / y, ...) round at each of up to four
      // steps; the fused relu/gelu backwards round once. rsqrt's y^3 and log's 1/x grow to a
      // few times the gradient's typical size, hence 8 units of the largest magnitude.
      check_gradient_rounded(
          [&](const Tensor& input) { return op.fn(unary_input(input, op)); }, x, weight, dtype, 8);
    }
  }
}

TEST_CASE("16-bit clamp: bounds compared in float32, gradient passing inside them") {
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = representable_randn({40}, dtype, 2.0);
    const Tensor x16 = x.to(dtype);
    check_rounded(clamp(x16, -0.3, 0.7), clamp(x, -0.3, 0.7));
    check_rounded(clamp(x16, std::nullopt, 0.7), clamp(x, std::nullopt, 0.7));
    check_rounded(clamp(x16, -0.3, std::nullopt), clamp(x, -0.3, std::nullopt));
    // Without a bound, infinities and NaN pass unchanged.
    const Tensor special = tensor<float>({INFINITY, -INFINITY, NAN, 3.0f}, {4});
    const std::vector<float> unbounded = clamp(special.to(dtype), std::nullopt, std::nullopt).to_vector<float>();
    CHECK(unbounded[0] == INFINITY);
    CHECK(unbounded[1] == -INFINITY);
    CHECK(std::isnan(unbounded[2]));
    CHECK(unbounded[3] == 3.0f);
    CHECK(clamp(special.to(dtype), -1.0, 1.0).to_vector<float>()[1] == -1.0f);
    const Tensor weight = representable_randn({40}, dtype);
    check_gradient_rounded([](const Tensor& input) { return clamp(input, -0.3, 0.7); }, x, weight, dtype, 0);
  }
}

TEST_CASE("16-bit where, masked_fill, tril and triu, with their gradients") {
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor a = representable_randn({4, 6}, dtype);
    const Tensor b = representable_randn({6}, dtype);
    const Tensor condition = gt(representable_randn({4, 6}, dtype), 0.0);
    check_rounded(where(condition, a.to(dtype), b.to(dtype)), where(condition, a, b));
    check_rounded(where(condition, a.to(dtype), 0.5), where(condition, a, 0.5));
    check_rounded(masked_fill(a.to(dtype), condition, -1.5), masked_fill(a, condition, -1.5));
    check_rounded(tril(a.to(dtype), 1), tril(a, 1));
    check_rounded(triu(a.to(dtype), -1), triu(a, -1));
    const Tensor weight = representable_randn({4, 6}, dtype);
    // Selections and masks move gradient elements without arithmetic; the broadcast operand's
    // sum over 4 rows accumulates in double and rounds once, as float32's does.
    check_gradient_rounded([&](const Tensor& x) { return where(condition, x, b.to(x.dtype())); }, a, weight, dtype, 0);
    check_gradient_rounded([&](const Tensor& x) { return where(condition, a.to(x.dtype()), x); }, b, weight, dtype, 0);
    check_gradient_rounded([&](const Tensor& x) { return masked_fill(x, condition, 2.0); }, a, weight, dtype, 0);
    check_gradient_rounded([](const Tensor& x) { return tril(x); }, a, weight, dtype, 0);
  }
}

TEST_CASE("16-bit index_select and gather backwards add repeated indices in float32, rounding once") {
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    // 1000 picks of the same element: the gradient there is 1000 (exactly representable in both
    // formats). Adding ones into a 16-bit total would stop at 256 (bfloat16) or 2048 (float16:
    // 2048 + 1 rounds back to 2048), so only a float32 total reaches it.
    const Tensor picks = zeros({1000}, kInt64);
    Tensor x = ones({3}, dtype);
    x.requires_grad_(true);
    sum(index_select(x, 0, picks)).backward();
    CHECK(x.grad().dtype() == dtype);
    CHECK(x.grad().to_vector<double>() == std::vector<double>{1000, 0, 0});

    Tensor y = ones({2, 3}, dtype);
    y.requires_grad_(true);
    sum(gather(y, 1, zeros({2, 1000}, kInt64))).backward();
    CHECK(y.grad().to_vector<double>() == std::vector<double>{1000, 0, 0, 1000, 0, 0});

    // Random values and indices: the float32 backward's sums, rounded once.
    const Tensor values = representable_randn({5, 4}, dtype);
    const Tensor rows = randint(0, 5, {12}, kInt64);
    const Tensor columns = randint(0, 4, {5, 9}, kInt64);
    const Tensor weight_rows = representable_randn({12, 4}, dtype);
    const Tensor weight_columns = representable_randn({5, 9}, dtype);
    check_gradient_rounded([&](const Tensor& t) { return index_select(t, 0, rows); }, values, weight_rows, dtype, 0);
    check_gradient_rounded([&](const Tensor& t) { return gather(t, 1, columns); }, values, weight_columns, dtype, 0);
    check_rounded(index_select(values.to(dtype), 0, rows), index_select(values, 0, rows));
    check_rounded(gather(values.to(dtype), 1, columns), gather(values, 1, columns));
  }
}

TEST_CASE("16-bit factories: fills and ranges round once, random draws are float32's rounded") {
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    check_rounded(full({3}, -2.7, dtype), full({3}, -2.7, kFloat32));
    check_rounded(ones({2, 2}, dtype), ones({2, 2}, kFloat32));
    check_rounded(arange(-3.0, 3.0, 0.25, dtype), arange(-3.0, 3.0, 0.25, kFloat32));
    check_rounded(arange(300.0, dtype), arange(300.0, kFloat32));  // past 256 bfloat16 rounds to even

    // A 16-bit draw takes the words a float32 draw takes, so after the same seed it holds the
    // float32 values rounded: to nearest for randn, towards zero for rand.
    manual_seed(7);
    const Tensor normal32 = randn({4096}, kFloat32);
    manual_seed(7);
    check_rounded(randn({4096}, dtype), normal32);
    manual_seed(7);
    const std::vector<double> uniform32 = rand({4096}, kFloat32).to_vector<double>();
    manual_seed(7);
    const std::vector<double> uniform16 = rand({4096}, dtype).to_vector<double>();
    bool in_range = true, below_float32 = true, within_a_step = true;
    for (size_t i = 0; i < uniform16.size(); ++i) {
      in_range = in_range && uniform16[i] >= 0.0 && uniform16[i] < 1.0;
      below_float32 = below_float32 && uniform16[i] <= uniform32[i];
      // Rounding towards zero is off by less than one step, 2u relative.
      within_a_step = within_a_step && uniform32[i] - uniform16[i] < 2 * unit_roundoff(dtype) * uniform32[i];
    }
    CHECK(in_range);  // rounded to nearest, the draws just under 1 would become 1
    CHECK(below_float32);
    CHECK(within_a_step);
    manual_seed(11);
    const Tensor integers32 = randint(0, 1000, {256}, kFloat32);
    manual_seed(11);
    check_rounded(randint(0, 1000, {256}, dtype), integers32);
  }
  // A double rounds once to 16 bits: 1 + 2^-8 + 2^-30 is just above the tie between 1 and
  // 1 + 2^-7 in bfloat16, so it rounds up; through the nearest float (1 + 2^-8, the tie) it
  // would round to even, 1.
  CHECK(full({}, 1.0 + 0x1p-8 + 0x1p-30, kBFloat16).item<double>() == 1.0 + 0x1p-7);
  CHECK(full({}, 1.0 + 0x1p-11 + 0x1p-40, kFloat16).item<double>() == 1.0 + 0x1p-10);
  CHECK(full({}, 1.0 + 0x1p-8, kBFloat16).item<double>() == 1.0);  // an exact tie still goes to even
}

TEST_CASE("16-bit in-place ops: add_, mul_, fill_ and zero_, with gradients") {
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor a = representable_randn({3, 4}, dtype);
    const Tensor row = representable_randn({4}, dtype);
    Tensor x = a.to(dtype);
    x.add_(row.to(dtype));
    check_rounded(x, add(a, row));
    Tensor reference = add(a, row).to(dtype).to(kFloat32);
    x.mul_(row.to(dtype));
    check_rounded(x, mul(reference, row));
    reference = mul(reference, row).to(dtype).to(kFloat32);
    x.add_(0.5);
    check_rounded(x, add(reference, 0.5));
    x.fill_(0.1);
    check_rounded(x, full({3, 4}, 0.1, kFloat32));
    x.zero_();
    CHECK(max_abs(x) == 0.0);

    // Gradients through in-place ops on a non-leaf.
    const Tensor weight = representable_randn({3, 4}, dtype);
    check_gradient_rounded(
        [&](const Tensor& input) {
          Tensor y = mul(input, 1.0);
          y.mul_(row.to(input.dtype()));
          y.add_(input);
          return y;
        },
        a, weight, dtype, 4);
  }
}

TEST_CASE("16-bit cat, stack, split and chunk, with gradients") {
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor a = representable_randn({2, 3}, dtype), b = representable_randn({4, 3}, dtype);
    const Tensor c = representable_randn({2, 3}, dtype);
    check_rounded(cat({a.to(dtype), b.to(dtype)}, 0), cat({a, b}, 0));
    check_rounded(cat({a.to(dtype), c.t().contiguous().t().to(dtype)}, 1), cat({a, c}, 1));
    check_rounded(stack({a.to(dtype), c.to(dtype)}, 1), stack({a, c}, 1));
    const std::vector<Tensor> pieces = split(b.to(dtype), 3, 0);
    REQUIRE(pieces.size() == 2);
    check_rounded(pieces[1], split(b, 3, 0)[1]);
    check_rounded(chunk(b.to(dtype), 2, 1)[0], chunk(b, 2, 1)[0]);
    const Tensor weight = representable_randn({2, 6}, dtype);
    check_gradient_rounded([&](const Tensor& x) { return cat({x, c.to(x.dtype())}, 1); }, a, weight, dtype, 0);
    const Tensor stacked_weight = representable_randn({2, 2, 3}, dtype);
    check_gradient_rounded([&](const Tensor& x) { return stack({c.to(x.dtype()), x}, 0); }, a, stacked_weight,
                           dtype, 0);
  }
  CHECK_THROWS_WITH_ALL(cat({ones({2}, kBFloat16), ones({2}, kFloat32)}), "cat", "bfloat16", "float32");
}

TEST_CASE("16-bit sort, argsort and topk order by value, NaN last, ties stable") {
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype_name(dtype));
    // Values that are distinct in float32 but tie once rounded sort as ties, in index order.
    const Tensor x = tensor<float>({3.0f, NAN, -1.0f, 1.001f, 1.0f, -INFINITY, 1.0f, 0.5f}, {8});
    const Tensor x16 = x.to(dtype);
    const Tensor rounded = x16.to(kFloat32);
    for (const bool descending : {false, true}) {
      CAPTURE(descending);
      const ValuesIndices sorted = sort(x16, 0, descending);
      const ValuesIndices expected = sort(rounded, 0, descending);
      check_rounded(sorted.values, expected.values);
      CHECK(sorted.indices.to_vector<int64_t>() == expected.indices.to_vector<int64_t>());
      CHECK(argsort(x16, 0, descending).to_vector<int64_t>() == expected.indices.to_vector<int64_t>());
    }
    const Tensor matrix = representable_randn({5, 9}, dtype);
    for (const int64_t dim : {0, 1}) {
      const ValuesIndices top = topk(matrix.to(dtype), 3, dim);
      const ValuesIndices expected = topk(matrix, 3, dim);
      check_rounded(top.values, expected.values);
      CHECK(top.indices.to_vector<int64_t>() == expected.indices.to_vector<int64_t>());
    }
    const Tensor weight = representable_randn({5, 3}, dtype);
    check_gradient_rounded([](const Tensor& t) { return topk(t, 3, 1).values; }, matrix, weight, dtype, 0);
  }
}

TEST_CASE("16-bit ops: errors name the op and the dtypes") {
  const Tensor x = ones({2}, kBFloat16);
  const Tensor flags = ones({2}, kBool);
  // Mixing dtypes is never converted silently.
  CHECK_THROWS_WITH_ALL(add(x, ones({2}, kFloat32)), "add", "dtype mismatch", "bfloat16", "float32");
  CHECK_THROWS_WITH_ALL(mul(x, ones({2}, kFloat16)), "mul", "dtype mismatch", "bfloat16", "float16");
  CHECK_THROWS_WITH_ALL(lt(ones({2}, kFloat16), ones({2}, kFloat64)), "lt", "float16", "float64");
  CHECK_THROWS_WITH_ALL(where(flags, x, ones({2}, kFloat32)), "where", "bfloat16", "float32");
  Tensor target = ones({2}, kFloat16);
  CHECK_THROWS_WITH_ALL(target.add_(x), "add_", "float16", "bfloat16");
  // Ops that need numbers or floating point still refuse bool and int64.
  CHECK_THROWS_WITH_ALL(add(flags, flags), "add", "bool");
  CHECK_THROWS_WITH_ALL(exp(flags), "exp", "bool");
  CHECK_THROWS_WITH_ALL(div(ones({2}, kInt64), ones({2}, kInt64)), "div", "int64");
  CHECK_THROWS_WITH_ALL(clamp(flags, 0.0, 1.0), "clamp", "bool");
  CHECK_THROWS_WITH_ALL(rand({2}, kInt64), "rand", "int64");
  CHECK_THROWS_WITH_ALL(randn({2}, kBool), "randn", "bool");
  CHECK_THROWS_WITH_ALL(arange(3.0, kBool), "arange", "bool");
}
