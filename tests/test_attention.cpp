// scaled_dot_product_attention: values against a naive loop (no mask, bool mask, float mask,
// causal), exact zeros at masked positions, dropout on the weights, gradcheck, errors.
#include <limits>

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
  manual_seed(11);
  check_close(scaled_dot_product_attention(q, k, v, options), dropped.output, 0.0, 0.0);
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
