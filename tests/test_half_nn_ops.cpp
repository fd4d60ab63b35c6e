// The CPU's neural-network ops on bfloat16 and float16 tensors: matmul, bmm, linear, einsum,
// softmax, log_softmax, layer_norm, cross_entropy, embedding, dropout, attention and the
// optimizer steps. Each compares the 16-bit op with the float32 op run on the same (already
// rounded) inputs and then rounded to the 16-bit format, forward and backward, and checks the
// errors for mixed dtypes.
//
// Why one unit in the last place (ulp) is the tolerance: the 16-bit kernels compute in float32
// and round once, so their float32 value differs from the float32 op's by float32 rounding
// only (about 2^-24 relative, or k 2^-24 of the sum of |terms| for a k-term sum). Rounding two
// float32 values that close to a format with 8 (bfloat16) or 11 (float16) significant bits
// gives the same 16-bit value, or neighbours when a rounding boundary falls between them: at
// most one ulp, which is 2^-7 |x| for bfloat16 and 2^-10 |x| for float16 at worst. Where the
// float32 values may differ by more than a 16-bit ulp (cancellation in a sum), the float32
// bound is added.
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "core/cpu/bf16_gemm.h"
#include "core/cpu/float16_gemm.h"
#include "core/ops/optimizer_steps.h"
#include "core/ops/softmax.h"
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

const DType kHalfTypes[] = {kBFloat16, kFloat16};

// The spacing of the format's values relative to the value (one ulp, at worst).
double relative_ulp(DType dtype) { return dtype == kBFloat16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10); }

// float16's smallest subnormal spacing: below 2^-14, float16's ulp is absolute.
constexpr double kFloat16SubnormalUlp = 0x1p-24;

// float32's unit roundoff, for the float32 accumulation bound of a k-term sum.
constexpr double kFloat32Unit = 0x1p-24;

// A float32 tensor of normal values times `scale`, already representable in `dtype`: the
// inputs both the 16-bit op and its float32 reference take.
Tensor representable(const Shape& shape, DType dtype, double scale = 1.0) {
  return mul(randn(shape, kFloat32), scale).to(dtype).to(kFloat32);
}

// Checks a 16-bit result against the float32 op's result: within `ulps` ulps of the 16-bit
// format plus `float32_bound` (an absolute bound per element, or undefined for none).
void check_matches_rounded(const Tensor& actual, const Tensor& expected32, DType dtype, double ulps = 1.0,
                           const Tensor& float32_bound = Tensor()) {
  REQUIRE(actual.defined());
  REQUIRE(actual.dtype() == dtype);
  REQUIRE_MESSAGE(actual.sizes() == expected32.sizes(),
                  "shape " << shape_str(actual.sizes()) << " != " << shape_str(expected32.sizes()));
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected32.to(dtype).to_vector<double>();
  const std::vector<double> bound =
      float32_bound.defined() ? float32_bound.to_vector<double>() : std::vector<double>(a.size(), 0.0);
  const double absolute_ulp = dtype == kFloat16 ? kFloat16SubnormalUlp : 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(e[i])) continue;
    if (std::isinf(a[i]) && a[i] == e[i]) continue;
    const double tolerance = ulps * (relative_ulp(dtype) * std::abs(e[i]) + absolute_ulp) + bound[i];
    if (!(std::abs(a[i] - e[i]) <= tolerance)) {
      FAIL(dtype_name(dtype) << " element " << i << ": " << a[i] << " != " << e[i] << " (tolerance " << tolerance
                             << ")");
    }
  }
}

// A k-term float32 sum of products a_i b_i may differ between two summation orders by about
// k 2^-24 sum |a_i b_i|: the bound for each element of a @ b.
Tensor product_bound(const Tensor& a, const Tensor& b) {
  const int64_t k = a.size(-1);
  return mul(matmul(abs(a), abs(b)), static_cast<double>(k) * kFloat32Unit);
}

// Whether the elementwise ops and reductions take 16-bit tensors yet (add, mul, sum, ...). The
// test cases that compose them skip themselves until they do.
bool elementwise_ops_take_16_bit() {
  try {
    (void)sum(add(ones({2}, kBFloat16), ones({2}, kBFloat16)));
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

TEST_CASE("16-bit matmul, bmm, linear and einsum: float32 products of the rounded operands, rounded once") {
  manual_seed(1);
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    // Plain, with a transposed operand (read in place), and with a broadcast batch.
    const Tensor a = representable({33, 47}, dtype), b = representable({47, 29}, dtype);
    check_matches_rounded(matmul(a.to(dtype), b.to(dtype)), matmul(a, b), dtype, 1.0, product_bound(a, b));
    const Tensor b_t = representable({29, 47}, dtype);
    check_matches_rounded(matmul(a.to(dtype), b_t.to(dtype).t()), matmul(a, b_t.t()), dtype, 1.0,
                          product_bound(a, b_t.t()));
    const Tensor batched = representable({3, 1, 8, 16}, dtype), shared = representable({2, 16, 5}, dtype);
    check_matches_rounded(matmul(batched.to(dtype), shared.to(dtype)), matmul(batched, shared), dtype, 1.0,
                          product_bound(batched, shared));
    // N-D @ 2-D folds the batch into rows; vectors on either side.
    const Tensor rows = representable({4, 6, 16}, dtype), right = representable({16, 9}, dtype);
    check_matches_rounded(matmul(rows.to(dtype), right.to(dtype)), matmul(rows, right), dtype, 1.0,
                          product_bound(rows, right));
    const Tensor vector = representable({16}, dtype);
    check_matches_rounded(matmul(vector.to(dtype), right.to(dtype)), matmul(vector, right), dtype, 2.0);
    check_matches_rounded(matmul(right.t().to(dtype), vector.to(dtype)), matmul(right.t(), vector), dtype, 2.0);
    // bmm, and a batch large enough to be split across threads.
    const Tensor p = representable({32, 24, 20}, dtype), q = representable({32, 20, 12}, dtype);
    check_matches_rounded(bmm(p.to(dtype), q.to(dtype)), bmm(p, q), dtype, 1.0, product_bound(p, q));
    // linear adds x W^T to the bias already in the output (BLAS's beta = 1), read as float32.
    const Tensor x = representable({5, 7, 16}, dtype), weight = representable({11, 16}, dtype),
                 bias = representable({11}, dtype);
    const Tensor bound = add(product_bound(x, weight.t()), mul(abs(bias), kFloat32Unit));
    check_matches_rounded(linear(x.to(dtype), weight.to(dtype), bias.to(dtype)), linear(x, weight, bias), dtype, 1.0,
                          bound);
    check_matches_rounded(einsum("bij,bjk->bik", {p.to(dtype), q.to(dtype)}), einsum("bij,bjk->bik", {p, q}), dtype,
                          1.0, product_bound(p, q));
    // An empty sum is 0.
    const Tensor empty = matmul(zeros({3, 0}, dtype), zeros({0, 4}, dtype));
    CHECK(empty.dtype() == dtype);
    CHECK(empty.to_vector<float>() == std::vector<float>(12, 0.0f));
  }
}

TEST_CASE("16-bit products by one give back every value of the format: widening and rounding are exact") {
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    // Except bfloat16's subnormals where the products run in pairs on AVX512-BF16, which the
    // instruction reads as zero (core/cpu/bf16_gemm.h says why that is accepted).
    const bool subnormals_flushed = dtype == kBFloat16 && cpu::bf16_products_in_pairs();
    // Every pattern, subnormals, infinities and NaNs included, as its exact float value.
    std::vector<float> values;
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const auto pattern = static_cast<uint16_t>(bits);
      values.push_back(dtype == kBFloat16 ? static_cast<float>(BFloat16::from_bits(pattern))
                                          : static_cast<float>(Float16::from_bits(pattern)));
    }
    const Tensor column = tensor<float>(values, {0x10000, 1}).to(dtype);
    const std::vector<float> product = matmul(column, ones({1, 1}, dtype)).to_vector<float>();
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isnan(values[i])) {
        REQUIRE(std::isnan(product[i]));
      } else if (subnormals_flushed && values[i] != 0 && std::fabs(values[i]) < FLT_MIN) {
        REQUIRE(product[i] == 0.0f);
      } else {
        REQUIRE(product[i] == values[i]);
      }
    }
  }
}

TEST_CASE("16-bit sums round once as half.h does: embedding's float32 table of two random gradients a row") {
  // Sums of two 16-bit values are exact in float32 and land on every kind of rounding case:
  // ties, carries into the exponent, subnormals, overflow to infinity.
  std::mt19937 random(11);
  std::uniform_int_distribution<uint32_t> pattern(0, 0xffff);
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    const uint16_t largest = dtype == kBFloat16 ? 0x7f7f : 0x7bff;
    auto decode = [dtype](uint16_t bits) {
      return dtype == kBFloat16 ? static_cast<float>(BFloat16::from_bits(bits))
                                : static_cast<float>(Float16::from_bits(bits));
    };
    auto round = [dtype](float value) {
      return dtype == kBFloat16 ? static_cast<float>(BFloat16(value)) : static_cast<float>(Float16(value));
    };
    const int64_t dim = 4096;
    std::vector<float> grads(2 * dim), expected(dim);
    for (int64_t i = 0; i < dim; ++i) {
      // Finite values: both signs, every exponent.
      const auto a = static_cast<uint16_t>(pattern(random) % (largest + 1) | (pattern(random) & 0x8000));
      const auto b = static_cast<uint16_t>(pattern(random) % (largest + 1) | (pattern(random) & 0x8000));
      grads[i] = decode(a);
      grads[dim + i] = decode(b);
      expected[i] = round(grads[i] + grads[dim + i]);
    }
    Tensor table = as_leaf(zeros({1, dim}, dtype));
    embedding(table, tensor<int64_t>({0, 0}, {2})).backward(tensor<float>(grads, {2, dim}).to(dtype));
    const std::vector<float> actual = table.grad().to_vector<float>();
    for (int64_t i = 0; i < dim; ++i) {
      if (std::isnan(expected[i])) {
        REQUIRE(std::isnan(actual[i]));
      } else {
        REQUIRE_MESSAGE(actual[i] == expected[i], grads[i] << " + " << grads[dim + i]);
      }
    }
  }
}

TEST_CASE("16-bit matmul and linear (no bias): gradients as float32's on the rounded values") {
  manual_seed(2);
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor a = representable({9, 24}, dtype), b = representable({24, 13}, dtype);
    const Tensor grad = representable({9, 13}, dtype);
    Tensor a16 = as_leaf(a.to(dtype)), b16 = as_leaf(b.to(dtype));
    matmul(a16, b16).backward(grad.to(dtype));
    Tensor a32 = as_leaf(a), b32 = as_leaf(b);
    matmul(a32, b32).backward(grad);
    check_matches_rounded(a16.grad(), a32.grad(), dtype, 1.0, product_bound(grad, b.t()));
    check_matches_rounded(b16.grad(), b32.grad(), dtype, 1.0, product_bound(a.t(), grad));

    const Tensor x = representable({2, 5, 24}, dtype), weight = representable({13, 24}, dtype);
    const Tensor grad_y = representable({2, 5, 13}, dtype);
    Tensor x16 = as_leaf(x.to(dtype)), w16 = as_leaf(weight.to(dtype));
    linear(x16, w16).backward(grad_y.to(dtype));
    Tensor x32 = as_leaf(x), w32 = as_leaf(weight);
    linear(x32, w32).backward(grad_y);
    check_matches_rounded(x16.grad(), x32.grad(), dtype, 1.0, product_bound(grad_y, weight));
    const Tensor grad_rows = grad_y.reshape({10, 13}), x_rows = x.reshape({10, 24});
    check_matches_rounded(w16.grad(), w32.grad(), dtype, 1.0, product_bound(grad_rows.t(), x_rows));
  }
}

TEST_CASE("16-bit products: mixed dtypes are refused with both named") {
  const Tensor a = ones({2, 3}, kBFloat16), b = ones({3, 2}, kFloat32);
  CHECK_THROWS_WITH_ALL(matmul(a, b), "matmul", "bfloat16", "float32");
  CHECK_THROWS_WITH_ALL(bmm(ones({1, 2, 3}, kFloat16), ones({1, 3, 2}, kBFloat16)), "bmm", "float16", "bfloat16");
  CHECK_THROWS_WITH_ALL(linear(ones({2, 3}, kFloat32), ones({4, 3}, kFloat16)), "linear", "float32", "float16");
  CHECK_THROWS_WITH_ALL(linear(ones({2, 3}, kBFloat16), ones({4, 3}, kBFloat16), ones({4}, kFloat32)), "linear",
                        "bfloat16", "float32");
  CHECK_THROWS_WITH_ALL(einsum("ij,jk->ik", {a, b}), "bfloat16", "float32");
}

TEST_CASE("16-bit softmax and log_softmax: along the last dim and along a strided dim, with gradients") {
  manual_seed(3);
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    for (const bool log : {false, true}) {
      CAPTURE(log);
      auto op = [log](const Tensor& x, int64_t dim) { return log ? log_softmax(x, dim) : softmax(x, dim); };
      for (const int64_t dim : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
        CAPTURE(dim);
        const Tensor x = representable({6, 300, 5}, dtype, 3.0);
        const Tensor grad = representable({6, 300, 5}, dtype);
        Tensor x16 = as_leaf(x.to(dtype)), x32 = as_leaf(x);
        const Tensor y16 = op(x16, dim), y32 = op(x32, dim);
        check_matches_rounded(y16, y32, dtype);
        y16.backward(grad.to(dtype));
        // The float32 backward kernel on the same rounded softmax the 16-bit one saved: its
        // row sum of grad * y (or of grad) in float32 order apart, the same arithmetic.
        const int64_t along = dim < 0 ? dim + 3 : dim;
        const int64_t outer = along == 0 ? 1 : (along == 1 ? 6 : 6 * 300), n = x.size(along);
        const int64_t inner = x.numel() / (outer * n);
        const Tensor expected = empty({6, 300, 5}, kFloat32);
        kernels::softmax_backward[Device()](expected, grad, y16.detach().to(kFloat32), outer, n, inner, log);
        const Tensor row_sum = sum(abs(log ? grad : mul(grad, y32.detach())), {dim}, true);
        const Tensor bound = mul(expand(row_sum, {6, 300, 5}), static_cast<double>(n) * kFloat32Unit);
        check_matches_rounded(x16.grad(), expected, dtype, 1.0, log ? bound : mul(bound, abs(y32.detach())));
      }
    }
  }
}

TEST_CASE("16-bit layer_norm: float32 statistics, outputs and gradients rounded once") {
  manual_seed(4);
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    // An offset mean: the float32 statistics keep the spread that 16-bit ones would lose.
    const Tensor x = add(representable({4, 3, 64}, dtype), 8.0).to(dtype).to(kFloat32);
    const Tensor weight = representable({64}, dtype), bias = representable({64}, dtype);
    const Tensor grad = representable({4, 3, 64}, dtype);
    Tensor x16 = as_leaf(x.to(dtype)), w16 = as_leaf(weight.to(dtype)), b16 = as_leaf(bias.to(dtype));
    Tensor x32 = as_leaf(x), w32 = as_leaf(weight), b32 = as_leaf(bias);
    const Tensor y16 = layer_norm(x16, {64}, w16, b16), y32 = layer_norm(x32, {64}, w32, b32);
    check_matches_rounded(y16, y32, dtype);
    y16.backward(grad.to(dtype));
    y32.backward(grad);
    // The row sums of grad_x (64 terms up to about 4 in size) and the parameters' sums over 12
    // rows (terms up to about 16 and 4) may cancel: their float32 bound, k 2^-24 sum |terms|, is
    // added to the ulp.
    check_matches_rounded(x16.grad(), x32.grad(), dtype, 1.0, full({4, 3, 64}, 64 * kFloat32Unit * 64 * 4.0));
    check_matches_rounded(w16.grad(), w32.grad(), dtype, 1.0, full({64}, 12 * kFloat32Unit * 12 * 16.0));
    check_matches_rounded(b16.grad(), b32.grad(), dtype, 1.0, full({64}, 12 * kFloat32Unit * 12 * 4.0));
    // Without weight and bias.
    Tensor plain16 = as_leaf(x.to(dtype)), plain32 = as_leaf(x);
    check_matches_rounded(layer_norm(plain16, {3, 64}), layer_norm(plain32, {3, 64}), dtype);
  }
  CHECK_THROWS_WITH_ALL(layer_norm(ones({2, 4}, kBFloat16), {4}, ones({4}, kFloat32)), "layer_norm", "float32",
                        "bfloat16");
}

TEST_CASE("16-bit cross_entropy: float32 statistics, the loss in the logits' dtype, gradients rounded once") {
  manual_seed(5);
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor logits = representable({7, 5, 33}, dtype, 4.0);
    const Tensor targets = tensor<int64_t>({0,  32, 5, 7, 1, -100, 3, 3, 3, 9, 10, 11, 12, 0, 1, 2, 31, 30,
                                            29, 4,  5, 6, 7, 8,    9, 1, 2, 3, -100, 5, 6, 7, 8, 9, 10},
                                           {7, 5});
    for (const Reduction reduction : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
      for (const double smoothing : {0.0, 0.1}) {
        CAPTURE(static_cast<int>(reduction));
        CAPTURE(smoothing);
        const CrossEntropyOptions options{-100, smoothing, reduction};
        Tensor x16 = as_leaf(logits.to(dtype)), x32 = as_leaf(logits);
        const Tensor loss16 = cross_entropy(x16, targets, options), loss32 = cross_entropy(x32, targets, options);
        CHECK(loss16.dtype() == dtype);
        check_matches_rounded(loss16, loss32, dtype);
        const Tensor grad = reduction == Reduction::None ? representable({7, 5}, dtype) : ones({}, kFloat32);
        loss16.backward(grad.to(dtype));
        loss32.backward(grad);
        check_matches_rounded(x16.grad(), x32.grad(), dtype);
      }
    }
  }
}

TEST_CASE("16-bit embedding: an exact gather, and gradients added up in float32") {
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor weight = representable({10, 6}, dtype);
    const Tensor ids = tensor<int64_t>({3, 0, 3, 9}, {2, 2});
    Tensor w16 = as_leaf(weight.to(dtype));
    const Tensor out = embedding(w16, ids);
    CHECK(out.dtype() == dtype);
    CHECK(out.to_vector<float>() == embedding(weight, ids).to_vector<float>());
    // 2000 gradients of 2^-10 for one id: a 16-bit running sum would stall once 2^-10 falls
    // below half its ulp (by 0.25 in bfloat16, 2 in float16 only after rounding up on ties);
    // the float32 one reaches the exact 1.953125.
    const Tensor many = full({2000}, 1.0, kInt64);
    Tensor table = as_leaf(zeros({4, 3}, dtype));
    embedding(table, many).backward(full({2000, 3}, std::ldexp(1.0, -10), dtype));
    check_matches_rounded(table.grad().slice(0, 1, 2), full({1, 3}, 2000 * std::ldexp(1.0, -10)), dtype);
    CHECK(table.grad().slice(0, 0, 1).to_vector<float>() == std::vector<float>(3, 0.0f));
    // With padding: that row gets no gradient.
    Tensor padded = as_leaf(weight.to(dtype));
    embedding(padded, ids, 3).backward(ones({2, 2, 6}, dtype));
    CHECK(padded.grad().slice(0, 3, 4).to_vector<float>() == std::vector<float>(6, 0.0f));
    CHECK(padded.grad().slice(0, 9, 10).to_vector<float>() == std::vector<float>(6, 1.0f));
  }
}

TEST_CASE("16-bit dropout: the float32 mask of the same seed, kept values scaled in float32 and rounded once") {
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = representable({37, 29}, dtype);
    manual_seed(6);
    Tensor x16 = as_leaf(x.to(dtype));
    const Tensor y16 = dropout(x16, 0.3, true);
    manual_seed(6);
    Tensor x32 = as_leaf(x);
    const Tensor y32 = dropout(x32, 0.3, true);
    check_matches_rounded(y16, y32, dtype);
    const std::vector<float> a = y16.to_vector<float>(), e = y32.to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) REQUIRE((a[i] == 0.0f) == (e[i] == 0.0f));
    const Tensor grad = representable({37, 29}, dtype);
    y16.backward(grad.to(dtype));
    y32.backward(grad);
    check_matches_rounded(x16.grad(), x32.grad(), dtype);
  }
}

TEST_CASE("16-bit scaled_dot_product_attention: float32 softmax and sums, saved softmax float32, rounded once") {
  struct Case {
    const char* name;
    bool causal = false;
    int mask = 0;  // 0 none, 1 bool, 2 float of q's dtype
    double dropout_p = 0.0;
  };
  const Case cases[] = {{"plain"}, {"causal", true}, {"bool mask", false, 1}, {"float mask", false, 2},
                        {"dropout", true, 0, 0.25}};
  for (const DType dtype : kHalfTypes) {
    for (const Case& c : cases) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(c.name);
      manual_seed(7);
      const Tensor q = representable({2, 3, 9, 8}, dtype), k = representable({2, 3, 11, 8}, dtype),
                   v = representable({2, 3, 11, 4}, dtype);
      const Tensor grad = representable({2, 3, 9, 4}, dtype);
      AttentionOptions options16, options32;
      options16.is_causal = options32.is_causal = c.causal;
      options16.dropout_p = options32.dropout_p = c.dropout_p;
      if (c.mask == 1) {
        const Tensor allowed = gt(randn({9, 11}), -0.5);
        options16.attn_mask = options32.attn_mask = allowed;
      } else if (c.mask == 2) {
        const Tensor added = representable({3, 9, 11}, dtype);
        options16.attn_mask = added.to(dtype);
        options32.attn_mask = added;
      }
      Tensor q16 = as_leaf(q.to(dtype)), k16 = as_leaf(k.to(dtype)), v16 = as_leaf(v.to(dtype));
      Tensor q32 = as_leaf(q), k32 = as_leaf(k), v32 = as_leaf(v);
      manual_seed(8);
      const Tensor out16 = scaled_dot_product_attention(q16, k16, v16, options16);
      manual_seed(8);
      const Tensor out32 = scaled_dot_product_attention(q32, k32, v32, options32);
      // The same float32 arithmetic on the same values: float32 rounding apart, the same result,
      // but for products on ember's own 16-bit gemms, which round the weights W and the scores'
      // gradient dS to the 16-bit dtype (core/ops/attention_cpu.cpp). Each such rounding moves a
      // term x of a product by at most u |x| + e: u = 2^-8 (bfloat16) or 2^-11 (float16), and e
      // half the spacing of the subnormals a tiny x may round to (2^-25 for float16, 2^-134 for
      // bfloat16; float32's smallest normal where bfloat16's products run in pairs, which read
      // subnormals as zero). So the
      // products' errors are bounded by u |W| |v| + e 1 |v| for out, u |W|^T |dO| + e 1 |dO|
      // for dV, scale (u |dS| + e 1) |k| and scale (u |dS| + e 1)^T |q| for dQ and dK (1 a
      // matrix of ones). With P the softmax (rows summing to 1) and f = 1/(1 - p) the dropout's
      // largest factor, |W| <= f P and |dS| = P |dP - rowsum(P dP)| <= P (A + rowsum(P A)), where
      // |dP| <= A = f |dO| |v|^T.
      Tensor bound_out, bound_q, bound_k, bound_v;
      const bool own_gemm = dtype == kBFloat16 ? cpu::bf16_gemm_in_hardware() : cpu::float16_gemm_in_hardware();
      if (own_gemm) {
        AttentionOptions plain = options32;
        plain.dropout_p = 0.0;
        const Tensor softmax = scaled_dot_product_attention_with_weights(q, k, v, plain).weights;
        const Tensor p = where(eq(softmax, softmax), softmax, 0.0);  // a fully masked row's NaNs: no terms
        const double u = dtype == kBFloat16 ? 0x1p-8 : 0x1p-11, f = 1.0 / (1.0 - c.dropout_p);
        const double e = dtype == kFloat16                ? 0x1p-25
                         : cpu::bf16_products_in_pairs() ? static_cast<double>(FLT_MIN)
                                                         : 0x1p-134;
        const double scale = 1.0 / std::sqrt(8.0);
        // u |x| + e, for a matrix of bounds |x|.
        auto rounded_term = [&](const Tensor& magnitude) { return add(mul(magnitude, u), e); };
        bound_out = matmul(rounded_term(mul(p, f)), abs(v));
        bound_v = matmul(transpose(rounded_term(mul(p, f)), -2, -1), abs(grad));
        const Tensor a = mul(matmul(abs(grad), transpose(abs(v), -2, -1)), f);
        const Tensor d_scores = rounded_term(mul(p, add(a, sum(mul(p, a), {-1}, true))));
        bound_q = mul(matmul(d_scores, abs(k)), scale);
        bound_k = mul(matmul(transpose(d_scores, -2, -1), abs(q)), scale);
      }
      check_matches_rounded(out16, out32, dtype, 1.0, bound_out);
      out16.backward(grad.to(dtype));
      out32.backward(grad);
      check_matches_rounded(q16.grad(), q32.grad(), dtype, 1.0, bound_q);
      check_matches_rounded(k16.grad(), k32.grad(), dtype, 1.0, bound_k);
      check_matches_rounded(v16.grad(), v32.grad(), dtype, 1.0, bound_v);
    }
  }
  const Tensor q = ones({1, 2, 4}, kBFloat16);
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, ones({1, 2, 4}, kFloat32), q), "scaled_dot_product_attention",
                        "bfloat16", "float32");
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, q, ones({1, 2, 4}, kFloat16)), "bfloat16", "float16");
  AttentionOptions float32_mask;
  float32_mask.attn_mask = zeros({2, 2}, kFloat32);
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, q, q, float32_mask), "attn_mask", "bfloat16", "float32");
}

TEST_CASE("16-bit optimizer steps: Adam and SGD in float32, parameters and state rounded once") {
  manual_seed(9);
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    const int64_t n = 1000;
    const Tensor param = representable({n}, dtype), grad = representable({n}, dtype, 0.1);
    const Tensor exp_avg = representable({n}, dtype, 0.01), exp_avg_sq = abs(representable({n}, dtype, 0.001));
    const Tensor lr = full({}, 1e-2, kFloat64);
    for (const bool decoupled : {false, true}) {
      CAPTURE(decoupled);
      const AdamStepOptions options{0.9, 0.999, 1e-8, 0.01, decoupled};
      auto run = [&](DType as) {
        std::vector<Tensor> state{param.to(as).clone(), grad.to(as), exp_avg.to(as).clone(),
                                  exp_avg_sq.to(as).clone(), full({}, 3.0, kFloat64)};
        kernels::adam_step[Device()](std::span(&state[0], 1), std::span(&state[1], 1), std::span(&state[2], 1),
                                     std::span(&state[3], 1), std::span(&state[4], 1), lr, options);
        return state;
      };
      const std::vector<Tensor> half = run(dtype), single = run(kFloat32);
      check_matches_rounded(half[0], single[0], dtype);
      check_matches_rounded(half[2], single[2], dtype);
      check_matches_rounded(half[3], single[3], dtype);
      CHECK(half[4].item<double>() == 4.0);
    }
    for (const bool nesterov : {false, true}) {
      CAPTURE(nesterov);
      const SGDStepOptions options{0.9, 0.0, 0.01, nesterov};
      for (const bool first_step : {true, false}) {
        CAPTURE(first_step);
        auto run = [&](DType as) {
          std::vector<Tensor> params{param.to(as).clone()}, grads{grad.to(as)};
          std::vector<Tensor> buffers{first_step ? Tensor() : exp_avg.to(as).clone()};
          kernels::sgd_step[Device()](params, grads, buffers, lr, options);
          return std::vector<Tensor>{params[0], buffers[0]};
        };
        const std::vector<Tensor> half = run(dtype), single = run(kFloat32);
        check_matches_rounded(half[0], single[0], dtype);
        check_matches_rounded(half[1], single[1], dtype);
      }
    }
    std::vector<Tensor> params{param.to(dtype).clone()}, grads{grad.to(dtype)}, buffers{Tensor()};
    kernels::sgd_step[Device()](params, grads, buffers, lr, SGDStepOptions{0.0, 0.0, 0.0, false});
    check_matches_rounded(params[0], sub(param, mul(grad, 1e-2)), dtype);
    CHECK(!buffers[0].defined());
  }
}

TEST_CASE("16-bit parameters: nn::SGD and nn::Adam step them through the fused kernels") {
  manual_seed(12);
  for (const DType dtype : kHalfTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor start = representable({7, 16}, dtype), grad = representable({7, 16}, dtype);
    const Tensor every_row = arange(7.0, kInt64);
    // One step from the same start and the same gradient (embedding's backward of every row
    // once is the gradient itself), in 16 bits and in float32. (Steps from a 16-bit state are
    // the kernel test's above: from here the two runs' states would differ.)
    auto step = [&](DType as, auto make_optimizer) {
      Tensor weight = as_leaf(start.to(as).clone());  // its own storage: the step updates it in place
      auto optimizer = make_optimizer(weight);
      optimizer.zero_grad();
      embedding(weight, every_row).backward(grad.to(as));
      optimizer.step();
      return weight.detach();
    };
    auto sgd = [](const Tensor& w) { return nn::SGD({w}, {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}); };
    auto adam = [](const Tensor& w) { return nn::Adam({w}, {.lr = 0.01}); };
    check_matches_rounded(step(dtype, sgd), step(kFloat32, sgd), dtype);
    check_matches_rounded(step(dtype, adam), step(kFloat32, adam), dtype);
  }
}

// These compose the elementwise ops and reductions (add, mul, sum, ...) on 16-bit tensors,
// which another part of ember migrates: they run once those ops take 16-bit tensors.
TEST_SUITE("16-bit backward formulas composed of elementwise ops") {
  TEST_CASE("linear's bias gradient, a broadcast matmul's gradient and the composed attention") {
    if (!elementwise_ops_take_16_bit()) {
      MESSAGE("skipped: add and sum do not take 16-bit tensors yet");
      return;
    }
    manual_seed(10);
    for (const DType dtype : kHalfTypes) {
      CAPTURE(dtype_name(dtype));
      const Tensor x = representable({6, 16}, dtype), weight = representable({5, 16}, dtype),
                   bias = representable({5}, dtype), grad = representable({6, 5}, dtype);
      Tensor b16 = as_leaf(bias.to(dtype)), b32 = as_leaf(bias);
      linear(x.to(dtype), weight.to(dtype), b16).backward(grad.to(dtype));
      linear(x, weight, b32).backward(grad);
      check_matches_rounded(b16.grad(), b32.grad(), dtype, 1.0, full({5}, 6 * 4 * kFloat32Unit));

      const Tensor batched = representable({3, 4, 16}, dtype), shared = representable({16, 5}, dtype);
      const Tensor grad_out = representable({3, 4, 5}, dtype);
      Tensor s16 = as_leaf(shared.to(dtype)), s32 = as_leaf(shared);
      matmul(batched.to(dtype), s16).backward(grad_out.to(dtype));
      matmul(batched, s32).backward(grad_out);
      check_matches_rounded(s16.grad(), s32.grad(), dtype, 1.0,
                            product_bound(batched.reshape({12, 16}).t(), grad_out.reshape({12, 5})));

      const Tensor q = representable({2, 5, 8}, dtype), k = representable({2, 6, 8}, dtype),
                   v = representable({2, 6, 4}, dtype);
      const AttentionResult with_weights =
          scaled_dot_product_attention_with_weights(q.to(dtype), k.to(dtype), v.to(dtype));
      const AttentionResult reference = scaled_dot_product_attention_with_weights(q, k, v);
      // Composed of ops, each rounding: the scores (|s| up to about 4) are rounded twice, by the
      // product and by the scaling, 8 units of |s| rounding at most; a softmax weight's
      // relative error is at most twice its scores', so 8 ulps, and one more for its own
      // rounding. The output adds up weights times v (|v| up to about 4).
      check_matches_rounded(with_weights.weights, reference.weights, dtype, 9.0);
      check_matches_rounded(with_weights.output, reference.output, dtype, 2.0,
                            full({2, 5, 4}, 8.0 * relative_ulp(dtype) * 4.0));
    }
  }
}
