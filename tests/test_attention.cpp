// scaled_dot_product_attention: values against a naive loop (no mask, bool mask, float mask,
// causal), exact zeros at masked positions, dropout on the weights, the fused kernels against
// the composed form, gradcheck, errors.
#include <limits>
#include <tuple>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Naive attention over q [B, L, E], k [B, S, E], v [B, S, Ev] with an additive mask [L, S]
// (0 or -inf for bool masks), in double. Returns {output, weights}.
std::pair<Tensor, Tensor> reference_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const std::vector<double>& additive_mask, double scale) {
  const int64_t batch = q.size(0), L = q.size(1), E = q.size(2), S = k.size(1), Ev = v.size(2);
  const std::vector<double> qv = q.contiguous().to_vector<double>(), kv = k.contiguous().to_vector<double>(),
                            vv = v.contiguous().to_vector<double>();
  std::vector<double> out(batch * L * Ev, 0.0), weights(batch * L * S, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> scores(S);
      double max = -kInf;
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += qv[(b * L + i) * E + e] * kv[(b * S + j) * E + e];
        scores[j] = dot * scale + (additive_mask.empty() ? 0.0 : additive_mask[i * S + j]);
        max = std::max(max, scores[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < S; ++j) sum += std::exp(scores[j] - max);
      for (int64_t j = 0; j < S; ++j) {
        const double w = std::exp(scores[j] - max) / sum;
        weights[(b * L + i) * S + j] = w;
        for (int64_t e = 0; e < Ev; ++e) out[(b * L + i) * Ev + e] += w * vv[(b * S + j) * Ev + e];
      }
    }
  }
  return {tensor(out, {batch, L, Ev}, kFloat64), tensor(weights, {batch, L, S}, kFloat64)};
}

// The output of attention on views that `make_qkv` builds from fresh copies of `inputs`, and
// the gradients of those copies for the upstream gradient `upstream`: through the fused
// kernels (scaled_dot_product_attention) or the composed ops (the _with_weights form).
template <class MakeQkv>
std::vector<Tensor> attention_and_gradients(bool fused, const std::vector<Tensor>& inputs, MakeQkv make_qkv,
                                            const AttentionOptions& options, const Tensor& upstream) {
  std::vector<Tensor> leaves;
  for (const Tensor& input : inputs) leaves.push_back(as_leaf(input));
  const auto [q, k, v] = make_qkv(leaves);
  manual_seed(5);
  const Tensor out = fused ? scaled_dot_product_attention(q, k, v, options)
                           : scaled_dot_product_attention_with_weights(q, k, v, options).output;
  REQUIRE(out.grad_fn() != nullptr);
  CHECK((out.grad_fn()->op == "attention") == fused);
  sum(mul(out, upstream)).backward();
  std::vector<Tensor> results{out.detach()};
  for (const Tensor& leaf : leaves) results.push_back(leaf.grad());
  return results;
}

template <class MakeQkv>
void check_fused_matches_composed(const std::vector<Tensor>& inputs, MakeQkv make_qkv, const AttentionOptions& options,
                                  double tolerance) {
  std::vector<Tensor> probe;
  for (const Tensor& input : inputs) probe.push_back(input.detach());
  const auto [q, k, v] = make_qkv(probe);
  Shape out_shape = q.sizes();
  out_shape.back() = v.size(-1);
  const Tensor upstream = randn(out_shape, TensorOptions(q.dtype()));
  const std::vector<Tensor> fused = attention_and_gradients(true, inputs, make_qkv, options, upstream);
  const std::vector<Tensor> composed = attention_and_gradients(false, inputs, make_qkv, options, upstream);
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("result " << i << " (0: output, then the inputs' gradients)");
    check_close(fused[i], composed[i], tolerance, tolerance);
  }
}

using Qkv = std::tuple<Tensor, Tensor, Tensor>;

}  // namespace

TEST_CASE("attention matches a naive loop without a mask, with bool and float masks, and causal") {
  const Tensor q = randn({2, 3, 4}, kFloat64), k = randn({2, 5, 4}, kFloat64), v = randn({2, 5, 6}, kFloat64);
  const double scale = 0.5;  // 1/sqrt(4)

  auto [out, weights] = scaled_dot_product_attention_with_weights(q, k, v);
  auto [ref_out, ref_weights] = reference_attention(q, k, v, {}, scale);
  check_close(out, ref_out, 1e-12);
  check_close(weights, ref_weights, 1e-12);
  check_close(scaled_dot_product_attention(q, k, v), ref_out, 1e-12);

  // Bool mask: true = may attend. Row 2 may only see position 4.
  const std::vector<bool> allowed = {true, false, true, true, false,  //
                                     false, true, true, false, true,  //
                                     false, false, false, false, true};
  std::vector<double> additive(15);
  for (int i = 0; i < 15; ++i) additive[i] = allowed[i] ? 0.0 : -kInf;
  AttentionOptions bool_options;
  bool_options.attn_mask = tensor(allowed, {3, 5});
  auto [masked_out, masked_weights] = scaled_dot_product_attention_with_weights(q, k, v, bool_options);
  auto [ref_masked_out, ref_masked_weights] = reference_attention(q, k, v, additive, scale);
  check_close(masked_out, ref_masked_out, 1e-12);
  check_close(masked_weights, ref_masked_weights, 1e-12);
  // Masked positions get exactly zero weight.
  const std::vector<double> w = masked_weights.to_vector<double>();
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 15; ++i) {
      if (!allowed[i]) CHECK(w[b * 15 + i] == 0.0);
    }
  }

  // Float mask: added to the scores; a custom scale.
  const Tensor float_mask = randn({3, 5}, kFloat64);
  AttentionOptions float_options;
  float_options.attn_mask = float_mask;
  float_options.scale = 0.3;
  auto [ref_float_out, ref_float_weights] = reference_attention(q, k, v, float_mask.to_vector<double>(), 0.3);
  check_close(scaled_dot_product_attention(q, k, v, float_options), ref_float_out, 1e-12);

  // Causal: position i sees j <= i, and the weights above the diagonal are exactly zero.
  std::vector<double> causal(15);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) causal[i * 5 + j] = j <= i ? 0.0 : -kInf;
  }
  AttentionOptions causal_options;
  causal_options.is_causal = true;
  auto [causal_out, causal_weights] = scaled_dot_product_attention_with_weights(q, k, v, causal_options);
  auto [ref_causal_out, ref_causal_weights] = reference_attention(q, k, v, causal, scale);
  check_close(causal_out, ref_causal_out, 1e-12);
  const std::vector<double> cw = causal_weights.to_vector<double>();
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 3; ++i) {
      for (int j = i + 1; j < 5; ++j) CHECK(cw[b * 15 + i * 5 + j] == 0.0);
    }
  }
}

TEST_CASE("attention with heads: q, k, v [B, H, L, E] and a padding mask [B, 1, 1, S]") {
  const Tensor q = randn({2, 2, 3, 4}), k = randn({2, 2, 5, 4}), v = randn({2, 2, 5, 4});
  const Tensor padding = tensor(std::vector<bool>{true, true, true, false, false, true, true, true, true, true},
                                {2, 1, 1, 5});
  AttentionOptions options;
  options.attn_mask = padding;
  const AttentionResult result = scaled_dot_product_attention_with_weights(q, k, v, options);
  CHECK(result.output.sizes() == Shape{2, 2, 3, 4});
  REQUIRE(result.weights.sizes() == Shape{2, 2, 3, 5});
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 3; ++i) {
      CHECK(result.weights.at<float>(0, h, i, 3) == 0.0f);
      CHECK(result.weights.at<float>(0, h, i, 4) == 0.0f);
      CHECK(result.weights.at<float>(1, h, i, 4) != 0.0f);
    }
  }
}

TEST_CASE("attention dropout zeroes weights and rescales the rest, reproducibly") {
  const Tensor q = randn({2, 4, 8}), k = randn({2, 6, 8}), v = randn({2, 6, 3});
  AttentionOptions options;
  options.dropout_p = 0.5;
  manual_seed(11);
  const AttentionResult dropped = scaled_dot_product_attention_with_weights(q, k, v, options);
  const AttentionResult plain = scaled_dot_product_attention_with_weights(q, k, v);
  // The weights are the plain ones through dropout with the same random numbers.
  manual_seed(11);
  const Tensor expected_weights = dropout(plain.weights, 0.5);
  check_close(dropped.weights, expected_weights, 0.0, 0.0);
  check_close(dropped.output, matmul(expected_weights, v), 1e-6);
  // The fused kernels draw the same mask; their products round differently.
  manual_seed(11);
  check_close(scaled_dot_product_attention(q, k, v, options), dropped.output, 1e-6);
}

TEST_CASE("fused attention kernels match the composed ops, forward and backward") {
  auto as_given = [](const std::vector<Tensor>& x) { return Qkv{x[0], x[1], x[2]}; };
  const std::vector<Tensor> three_d{randn({2, 3, 4}, kFloat64), randn({2, 5, 4}, kFloat64),
                                    randn({2, 5, 6}, kFloat64)};
  SUBCASE("no mask, and a custom scale") {
    check_fused_matches_composed(three_d, as_given, {}, 1e-12);
    AttentionOptions options;
    options.scale = 0.3;
    check_fused_matches_composed(three_d, as_given, options, 1e-12);
  }
  SUBCASE("causal, with fewer and with more queries than keys") {
    AttentionOptions options;
    options.is_causal = true;
    check_fused_matches_composed(three_d, as_given, options, 1e-12);
    check_fused_matches_composed({randn({2, 5, 4}, kFloat64), randn({2, 3, 4}, kFloat64), randn({2, 3, 2}, kFloat64)},
                                 as_given, options, 1e-12);
  }
  SUBCASE("bool masks: [L, S], and [B, 1, 1, S] padding that leaves one sequence no key at all") {
    AttentionOptions options;
    options.attn_mask = gt(randn({3, 5}), -0.5);
    check_fused_matches_composed(three_d, as_given, options, 1e-12);
    // Sequence 1 is all padding: its rows are NaN in both forms, and its gradients 0.
    AttentionOptions padding;
    padding.attn_mask = tensor(std::vector<bool>{true, true, true, false, false, false, false, false, false, false},
                               {2, 1, 1, 5});
    const std::vector<Tensor> heads{randn({2, 2, 3, 4}, kFloat64), randn({2, 2, 5, 4}, kFloat64),
                                    randn({2, 2, 5, 4}, kFloat64)};
    check_fused_matches_composed(heads, as_given, padding, 1e-12);
  }
  SUBCASE("a float mask with -inf entries, broadcast over the batch") {
    Tensor additive = randn({1, 3, 5}, kFloat64);
    additive = masked_fill(additive, lt(additive, -1.0), -std::numeric_limits<double>::infinity());
    AttentionOptions options;
    options.attn_mask = additive;
    check_fused_matches_composed(three_d, as_given, options, 1e-12);
  }
  SUBCASE("dropout draws the same mask in both forms") {
    AttentionOptions options;
    options.dropout_p = 0.3;
    check_fused_matches_composed(three_d, as_given, options, 1e-12);
    options.is_causal = true;
    check_fused_matches_composed(three_d, as_given, options, 1e-12);
  }
  SUBCASE("heads split off one projection, as MultiHeadAttention does: the output needs no copy to merge") {
    const int64_t batch = 3, length = 7, heads = 2, head_dim = 4;
    auto split_heads = [&](const std::vector<Tensor>& x) {
      auto split = [&](const Tensor& t) { return t.view({batch, length, heads, head_dim}).transpose(1, 2); };
      return Qkv{split(x[0]), split(x[1]), split(x[2])};
    };
    const std::vector<Tensor> projections{randn({batch, length, heads * head_dim}, kFloat64),
                                          randn({batch, length, heads * head_dim}, kFloat64),
                                          randn({batch, length, heads * head_dim}, kFloat64)};
    AttentionOptions options;
    options.dropout_p = 0.2;
    check_fused_matches_composed(projections, split_heads, options, 1e-12);
    const auto [q, k, v] = split_heads(projections);
    const Tensor out = scaled_dot_product_attention(q, k, v);
    CHECK(out.transpose(1, 2).is_contiguous());
  }
  SUBCASE("operands BLAS reads transposed, and one it cannot read without a copy") {
    auto strided = [](const std::vector<Tensor>& x) {
      // k as the transpose of a [B, E, S] tensor; q every other column of a [B, L, 2E] tensor.
      return Qkv{slice(x[0], 2, 0, std::nullopt, 2), x[1].transpose(1, 2), x[2]};
    };
    check_fused_matches_composed({randn({2, 3, 8}, kFloat64), randn({2, 4, 5}, kFloat64), randn({2, 5, 6}, kFloat64)},
                                 strided, {}, 1e-12);
  }
  SUBCASE("float32, with enough matrices for one per thread") {
    const std::vector<Tensor> many{randn({4, 4, 33, 16}), randn({4, 4, 40, 16}), randn({4, 4, 40, 8})};
    AttentionOptions options;
    options.dropout_p = 0.1;
    options.attn_mask = gt(randn({4, 1, 33, 40}), -1.0);
    check_fused_matches_composed(many, as_given, options, 1e-4);
  }
}

TEST_CASE("the fused kernels give way to the composed ops where they do not apply") {
  // A float mask that needs a gradient, and a k and v broadcast over q's batch.
  Tensor mask = randn({3, 5});
  mask.requires_grad_(true);
  AttentionOptions options;
  options.attn_mask = mask;
  const Tensor q = randn({2, 3, 4}).requires_grad_(true), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  CHECK(scaled_dot_product_attention(q, k, v, options).grad_fn()->op != "attention");
  CHECK(scaled_dot_product_attention(q, randn({1, 5, 4}), randn({1, 5, 6})).grad_fn()->op != "attention");
  CHECK(scaled_dot_product_attention(q, k, v).grad_fn()->op == "attention");
}

TEST_CASE("attention passes gradcheck with bool mask, float mask, causal and dropout") {
  const std::vector<Tensor> inputs{leaf({2, 3, 4}), leaf({2, 4, 4}), leaf({2, 4, 2})};
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); },
                  inputs);
  AttentionOptions bool_options;
  bool_options.attn_mask = tensor(std::vector<bool>{true, false, true, true, true, true, false, false, false, true,
                                                    true, false},
                                  {3, 4});
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], bool_options); },
      inputs);
  // The float mask is an input too: its gradient is the scores' gradient.
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        AttentionOptions options;
        options.attn_mask = in[3];
        return scaled_dot_product_attention(in[0], in[1], in[2], options);
      },
      (std::vector<Tensor>{inputs[0], inputs[1], inputs[2], leaf({1, 3, 4})}));
  AttentionOptions causal_options;
  causal_options.is_causal = true;
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], causal_options); },
      (std::vector<Tensor>{leaf({2, 4, 3}), leaf({2, 4, 3}), leaf({2, 4, 2})}));
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        AttentionOptions options;
        options.dropout_p = 0.4;
        manual_seed(3);  // the same dropout mask on every evaluation
        return scaled_dot_product_attention(in[0], in[1], in[2], options);
      },
      inputs);
  // Heads split off one projection with a padding mask, and a float mask that is a constant:
  // both through the fused kernels.
  const Tensor padding = tensor(std::vector<bool>{true, true, false, true, true, true, true, false}, {2, 1, 1, 4});
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        auto split = [](const Tensor& t) { return t.view({2, 4, 2, 3}).transpose(1, 2); };
        AttentionOptions options;
        options.attn_mask = padding;
        options.dropout_p = 0.25;
        manual_seed(4);
        return scaled_dot_product_attention(split(in[0]), split(in[1]), split(in[2]), options);
      },
      (std::vector<Tensor>{leaf({2, 4, 6}), leaf({2, 4, 6}), leaf({2, 4, 6})}));
  const Tensor constant_mask = randn({3, 4}, kFloat64);
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        AttentionOptions options;
        options.attn_mask = constant_mask;
        return scaled_dot_product_attention(in[0], in[1], in[2], options);
      },
      inputs);
  // Strided q (a transposed leaf) and the weights output.
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention_with_weights(in[0].transpose(1, 2), in[1], in[2]).weights;
      },
      (std::vector<Tensor>{leaf({2, 4, 3}), leaf({2, 5, 4}), leaf({2, 5, 2})}));
}

TEST_CASE("attention errors") {
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, randn({2, 5, 3}), v), "scaled_dot_product_attention",
                        "[2, 3, 4]", "[2, 5, 3]", "4 != 3");
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, k, randn({2, 4, 6})), "[2, 5, 4]", "[2, 4, 6]", "5 != 4");
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, k, v.to(kFloat64)), "float32", "float64");
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(randn({4}), k, v), "at least 2 dims", "[4]");
  AttentionOptions options;
  options.attn_mask = ones({3, 4}).to(kBool);
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, k, v, options), "attn_mask of shape [3, 4]", "[2, 3, 5]");
  options.attn_mask = ones({3, 5}, kInt64);
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, k, v, options), "attn_mask", "int64");
  options.attn_mask = ones({3, 5}).to(kBool);
  options.is_causal = true;
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, k, v, options), "attn_mask or is_causal");
  AttentionOptions dropout_options;
  dropout_options.dropout_p = 1.0;
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, k, v, dropout_options), "dropout_p", "[0, 1)");
}

TEST_CASE("a query whose keys are all masked attends to nothing: zero output, zero gradients, no NaN") {
  // Row 1 of the bool mask allows no key, and row 2 of the additive mask is all -inf: PyTorch's
  // safe softmax gives such rows zero weights, and so does ember in both forms.
  const Tensor bool_mask =
      tensor(std::vector<bool>{true, false, true, true, false, false, false, false, false, true, true, false}, {3, 4});
  std::vector<double> additive(12, 0.0);
  for (int j = 0; j < 4; ++j) additive[8 + j] = -kInf;
  additive[1] = -kInf;
  const Tensor float_mask = tensor(additive, {3, 4}, kFloat64);
  const std::vector<Tensor> inputs{leaf({2, 3, 4}), leaf({2, 4, 4}), leaf({2, 4, 2})};
  for (const auto& [mask, empty_row] : {std::pair{bool_mask, int64_t{1}}, std::pair{float_mask, int64_t{2}}}) {
    INFO(mask.dtype());
    AttentionOptions options;
    options.attn_mask = mask;
    for (const bool fused : {true, false}) {
      INFO((fused ? "fused" : "composed"));
      const Tensor upstream = randn({2, 3, 2}, kFloat64);
      const std::vector<Tensor> results =
          attention_and_gradients(fused, inputs, [](const std::vector<Tensor>& in) { return Qkv{in[0], in[1], in[2]}; },
                                  options, upstream);
      for (const Tensor& result : results) CHECK(std::isfinite(max_abs(result)));
      CHECK(max_abs(results[0].select(1, empty_row)) == 0.0);  // the output row
      CHECK(max_abs(results[1].select(1, empty_row)) == 0.0);  // that query's gradient
    }
    check_fused_matches_composed(inputs, [](const std::vector<Tensor>& in) { return Qkv{in[0], in[1], in[2]}; },
                                 options, 1e-12);
    const AttentionResult with_weights = scaled_dot_product_attention_with_weights(inputs[0], inputs[1], inputs[2], options);
    CHECK(max_abs(with_weights.weights.select(1, empty_row)) == 0.0);
    // The other rows are the softmax they always were.
    check_close(sum(with_weights.weights.narrow(1, 0, 1), Shape{-1}), ones({2, 1}, kFloat64), 1e-12, 0);
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], options); },
        inputs);
  }
  // 16-bit inputs take the same rule.
  AttentionOptions options;
  options.attn_mask = bool_mask;
  const Tensor out = scaled_dot_product_attention(randn({2, 3, 4}).to(kBFloat16), randn({2, 4, 4}).to(kBFloat16),
                                                  randn({2, 4, 2}).to(kBFloat16), options);
  CHECK(max_abs(out.to(kFloat32).select(1, 1)) == 0.0);
  CHECK(std::isfinite(max_abs(out.to(kFloat32))));
}

TEST_CASE("MultiHeadAttention over a sequence with every key padded gives finite values and gradients") {
  manual_seed(0);
  nn::MultiHeadAttention attention(8, 2);
  Tensor x = randn({2, 3, 8});
  x.requires_grad_(true);
  const Tensor padding = tensor(std::vector<bool>{false, false, true, true, true, true}, {2, 3});  // row 1 empty
  for (const bool need_weights : {false, true}) {
    const nn::MultiHeadAttentionOutput result =
        attention.forward(x, x, x, {.key_padding_mask = padding, .need_weights = need_weights});
    CHECK(std::isfinite(max_abs(result.output)));
    sum(result.output).backward();
    CHECK(std::isfinite(max_abs(x.grad())));
    for (const auto& [name, parameter] : attention.named_parameters()) {
      INFO(name);
      CHECK(std::isfinite(max_abs(parameter.grad())));
    }
    attention.zero_grad();
    x.mutable_grad() = Tensor();
  }
}
