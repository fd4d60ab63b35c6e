// nn::MultiHeadAttention: PyTorch's names and parameter counts, initial bounds, forward values
// against a naive per-head loop, padding and causal masks, dropout by mode, gradients, errors.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "helpers.h"
#include "nn/modules/attention.h"

using namespace ember;
using namespace ember::testing;

namespace {

// May query i of batch b attend to key j (same for every head)?
using Allowed = std::function<bool(int64_t b, int64_t i, int64_t j)>;

struct NaiveResult {
  Tensor output;   // [B, L, D]
  Tensor weights;  // [B, H, L, S]
};

// x [B, T, D] W^T + b for one Linear, by loops in double.
std::vector<double> naive_projection(const Tensor& x, const nn::Linear& layer) {
  const Tensor xd = x.to(kFloat64).contiguous(), w = layer.weight.to(kFloat64).contiguous();
  const std::vector<double> xs = xd.to_vector<double>(), ws = w.to_vector<double>();
  const std::vector<double> bs = layer.bias.defined() ? layer.bias.to(kFloat64).to_vector<double>()
                                                     : std::vector<double>(layer.out_features(), 0.0);
  const int64_t rows = x.numel() / layer.in_features(), in = layer.in_features(), out = layer.out_features();
  std::vector<double> result(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double total = bs[o];
      for (int64_t i = 0; i < in; ++i) total += xs[r * in + i] * ws[o * in + i];
      result[r * out + o] = total;
    }
  }
  return result;
}

// Multi-head attention written out head by head, query by query.
NaiveResult naive_attention(const nn::MultiHeadAttention& attention, const Tensor& query, const Tensor& key,
                            const Tensor& value, const Allowed& allowed) {
  const int64_t B = query.size(0), L = query.size(1), S = key.size(1), D = attention.d_model();
  const int64_t H = attention.num_heads(), E = attention.head_dim();
  const std::vector<double> q = naive_projection(query, *attention.q_proj);
  const std::vector<double> k = naive_projection(key, *attention.k_proj);
  const std::vector<double> v = naive_projection(value, *attention.v_proj);
  std::vector<double> merged(static_cast<size_t>(B * L * D), 0.0), weights(static_cast<size_t>(B * H * L * S), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> scores(S, -std::numeric_limits<double>::infinity());
        double best = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < S; ++j) {
          if (!allowed(b, i, j)) continue;
          double dot = 0;
          for (int64_t e = 0; e < E; ++e) dot += q[(b * L + i) * D + h * E + e] * k[(b * S + j) * D + h * E + e];
          scores[j] = dot / std::sqrt(static_cast<double>(E));
          best = std::max(best, scores[j]);
        }
        double total = 0;
        for (int64_t j = 0; j < S; ++j) total += std::exp(scores[j] - best);
        for (int64_t j = 0; j < S; ++j) {
          const double weight = std::exp(scores[j] - best) / total;
          weights[((b * H + h) * L + i) * S + j] = weight;
          for (int64_t e = 0; e < E; ++e) merged[(b * L + i) * D + h * E + e] += weight * v[(b * S + j) * D + h * E + e];
        }
      }
    }
  }
  const Tensor merged_tensor = tensor(merged, {B, L, D}, kFloat32);
  const std::vector<double> out = naive_projection(merged_tensor, *attention.out_proj);
  return {tensor(out, {B, L, D}, kFloat32), tensor(weights, {B, H, L, S}, kFloat32)};
}

const Allowed everything = [](int64_t, int64_t, int64_t) { return true; };

}  // namespace

TEST_CASE("MultiHeadAttention: PyTorch's names and parameter count") {
  nn::MultiHeadAttention attention(768, 12);
  CHECK(attention.num_parameters() == 2'362'368);
  CHECK(parameter_names(attention) ==
        std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight",
                                 "v_proj.bias", "out_proj.weight", "out_proj.bias"});
  CHECK(attention.head_dim() == 64);
  nn::MultiHeadAttention no_bias(768, 12, 0.0, /*bias=*/false);
  CHECK(no_bias.num_parameters() == 4 * 768 * 768);
  CHECK(parameter_names(no_bias).back() == "out_proj.weight");
}

TEST_CASE("MultiHeadAttention: initialised as PyTorch's packed in_proj, zero biases") {
  nn::MultiHeadAttention attention(256, 4);
  const double in_bound = std::sqrt(6.0 / (4 * 256.0));  // xavier over the [3 d_model, d_model] stack
  for (const auto& projection : {attention.q_proj, attention.k_proj, attention.v_proj}) {
    CHECK(max_abs(projection->weight) <= in_bound);
    CHECK(max_abs(projection->weight) > 0.99 * in_bound);
    CHECK(max_abs(projection->bias) == 0.0);
  }
  CHECK(max_abs(attention.out_proj->weight) <= 1.0 / std::sqrt(256.0));
  CHECK(max_abs(attention.out_proj->weight) > 0.99 / std::sqrt(256.0));
  CHECK(max_abs(attention.out_proj->bias) == 0.0);
}

TEST_CASE("MultiHeadAttention: forward matches a naive per-head loop (self and cross attention)") {
  nn::MultiHeadAttention attention(8, 2);
  {
    NoGradGuard no_grad;  // non-zero biases, so their use is checked too
    for (const auto& projection : {attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj}) {
      projection->bias.copy_(randn({8}));
    }
  }
  const Tensor x = randn({2, 3, 8});
  const auto self = attention.forward(x, x, x, {.need_weights = true});
  const NaiveResult expected = naive_attention(attention, x, x, x, everything);
  check_close(self.output, expected.output, 1e-5, 1e-4);
  check_close(self.weights, expected.weights, 1e-6, 1e-4);
  check_close(self.weights.sum({-1}), ones({2, 2, 3}), 1e-6, 1e-6);

  const Tensor memory = randn({2, 5, 8});
  const auto cross = attention.forward(x, memory, memory, {.need_weights = true});
  CHECK(cross.output.sizes() == Shape{2, 3, 8});
  CHECK(cross.weights.sizes() == Shape{2, 2, 3, 5});
  const NaiveResult expected_cross = naive_attention(attention, x, memory, memory, everything);
  check_close(cross.output, expected_cross.output, 1e-5, 1e-4);
  check_close(cross.weights, expected_cross.weights, 1e-6, 1e-4);

  CHECK_FALSE(attention.forward(x, x, x).weights.defined());
}

TEST_CASE("MultiHeadAttention: a key padding mask gives padded keys exactly zero weight") {
  nn::MultiHeadAttention attention(8, 2);
  const Tensor x = randn({2, 4, 8});
  // Batch 0 pads its last key, batch 1 its last two.
  const Tensor padding = tensor<bool>({false, false, false, true, false, false, true, true}, {2, 4});
  const auto result = attention.forward(x, x, x, {.key_padding_mask = padding, .need_weights = true});
  const Allowed allowed = [&](int64_t b, int64_t, int64_t j) { return !padding.at<bool>(b, j); };
  const NaiveResult expected = naive_attention(attention, x, x, x, allowed);
  check_close(result.output, expected.output, 1e-5, 1e-4);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 4; ++i) {
      CHECK(result.weights.at<float>(0, h, i, 3) == 0.0f);
      CHECK(result.weights.at<float>(1, h, i, 2) == 0.0f);
      CHECK(result.weights.at<float>(1, h, i, 3) == 0.0f);
      CHECK(result.weights.at<float>(0, h, i, 2) > 0.0f);
    }
  }
}

TEST_CASE("MultiHeadAttention: changing a padded token leaves the other tokens' outputs unchanged") {
  nn::MultiHeadAttention attention(8, 2);
  const Tensor x = randn({2, 4, 8});
  const Tensor padding = tensor<bool>({false, false, false, true, false, false, false, false}, {2, 4});
  const Tensor before = attention.forward(x, x, x, {.key_padding_mask = padding}).output;
  Tensor changed = x.clone();
  {
    NoGradGuard no_grad;
    changed.select(0, 0).select(0, 3).copy_(mul(randn({8}), 10.0));
  }
  const Tensor after = attention.forward(changed, changed, changed, {.key_padding_mask = padding}).output;
  check_close(after.narrow(1, 0, 3), before.narrow(1, 0, 3), 0, 0);  // batch 0, positions 0..2
  check_close(after.select(0, 1), before.select(0, 1), 0, 0);       // batch 1 untouched
  CHECK(max_abs(sub(after.select(0, 0).select(0, 3), before.select(0, 0).select(0, 3))) > 0);
}

TEST_CASE("MultiHeadAttention: causal attention ignores later tokens") {
  nn::MultiHeadAttention attention(8, 4);
  const Tensor x = randn({1, 5, 8});
  const auto result = attention.forward(x, x, x, {.is_causal = true, .need_weights = true});
  const Allowed causal = [](int64_t, int64_t i, int64_t j) { return j <= i; };
  check_close(result.output, naive_attention(attention, x, x, x, causal).output, 1e-5, 1e-4);
  for (int64_t h = 0; h < 4; ++h) {
    for (int64_t i = 0; i < 5; ++i) {
      for (int64_t j = i + 1; j < 5; ++j) CHECK(result.weights.at<float>(0, h, i, j) == 0.0f);
    }
  }
  Tensor changed = x.clone();
  {
    NoGradGuard no_grad;
    changed.select(1, 4).copy_(randn({1, 8}));
  }
  const Tensor after = attention.forward(changed, changed, changed, {.is_causal = true}).output;
  check_close(after.narrow(1, 0, 4), result.output.narrow(1, 0, 4), 0, 0);
}

TEST_CASE("MultiHeadAttention: bool and additive attn_mask agree, alone and with padding") {
  nn::MultiHeadAttention attention(6, 3);
  const Tensor x = randn({2, 3, 6});
  const Tensor allowed = tensor<bool>({true, false, true, true, true, false, false, true, true}, {3, 3});
  const Tensor additive = masked_fill(zeros({3, 3}), logical_not(allowed), -std::numeric_limits<double>::infinity());
  const auto with_bool = attention.forward(x, x, x, {.attn_mask = allowed, .need_weights = true});
  const auto with_float = attention.forward(x, x, x, {.attn_mask = additive});
  const Allowed by_mask = [&](int64_t, int64_t i, int64_t j) { return allowed.at<bool>(i, j); };
  check_close(with_bool.output, naive_attention(attention, x, x, x, by_mask).output, 1e-5, 1e-4);
  check_close(with_float.output, with_bool.output, 1e-6, 1e-5);
  CHECK(with_bool.weights.at<float>(1, 2, 0, 1) == 0.0f);

  // A float mask that is not just 0 / -inf is added to the scores.
  const Tensor bias = randn({3, 3});
  const auto biased = attention.forward(x, x, x, {.attn_mask = bias, .need_weights = true});
  CHECK(max_abs(sub(biased.output, attention.forward(x, x, x).output)) > 1e-4);

  // Per-batch, per-head masks [B, H, L, S].
  const Tensor full_mask = allowed.unsqueeze(0).unsqueeze(0).expand({2, 3, 3, 3});
  check_close(attention.forward(x, x, x, {.attn_mask = full_mask}).output, with_bool.output, 0, 0);

  // Padding merges with either kind of mask and with is_causal.
  const Tensor padding = tensor<bool>({false, false, true, false, false, false}, {2, 3});
  const Allowed both = [&](int64_t b, int64_t i, int64_t j) { return allowed.at<bool>(i, j) && !padding.at<bool>(b, j); };
  const Tensor expected = naive_attention(attention, x, x, x, both).output;
  check_close(attention.forward(x, x, x, {.key_padding_mask = padding, .attn_mask = allowed}).output, expected, 1e-5,
              1e-4);
  check_close(attention.forward(x, x, x, {.key_padding_mask = padding, .attn_mask = additive}).output, expected,
              1e-5, 1e-4);
  const Allowed causal_padded = [&](int64_t b, int64_t i, int64_t j) { return j <= i && !padding.at<bool>(b, j); };
  const auto causal = attention.forward(x, x, x, {.key_padding_mask = padding, .is_causal = true, .need_weights = true});
  check_close(causal.output, naive_attention(attention, x, x, x, causal_padded).output, 1e-5, 1e-4);
  CHECK(causal.weights.at<float>(0, 1, 2, 2) == 0.0f);
  CHECK(causal.weights.at<float>(1, 0, 0, 1) == 0.0f);
}

TEST_CASE("MultiHeadAttention: dropout on the weights only in training mode") {
  nn::MultiHeadAttention attention(8, 2, /*dropout=*/0.5);
  const Tensor x = randn({2, 6, 8});
  attention.eval();
  const auto evaluated = attention.forward(x, x, x, {.need_weights = true});
  check_close(evaluated.output, naive_attention(attention, x, x, x, everything).output, 1e-5, 1e-4);
  check_close(attention.forward(x, x, x).output, evaluated.output, 0, 0);

  attention.train();
  manual_seed(21);
  const auto trained = attention.forward(x, x, x, {.need_weights = true});
  const std::vector<float> weights = trained.weights.to_vector<float>();
  CHECK(std::count(weights.begin(), weights.end(), 0.0f) > 0);
  CHECK(max_abs(sub(trained.output, evaluated.output)) > 1e-4);
  manual_seed(21);
  check_close(attention.forward(x, x, x).output, trained.output, 0, 0);
}

TEST_CASE("MultiHeadAttention: gradcheck in float64 with a key padding mask and with a causal mask") {
  nn::MultiHeadAttention attention(4, 2);
  attention.to(kFloat64);
  {
    NoGradGuard no_grad;
    for (const auto& projection : {attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj}) {
      projection->bias.copy_(randn({4}, kFloat64));
    }
  }
  std::vector<Tensor> parameters = attention.parameters();

  const Tensor padding = tensor<bool>({false, false, true, false, false, false}, {2, 3});
  std::vector<Tensor> self_inputs{leaf({2, 3, 4})};
  self_inputs.insert(self_inputs.end(), parameters.begin(), parameters.end());
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        return attention.forward(in[0], in[0], in[0], {.key_padding_mask = padding}).output;
      },
      self_inputs);
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) { return attention.forward(in[0], in[0], in[0], {.is_causal = true}).output; },
      self_inputs);

  // Cross attention, L != S, with both masks and the weights as an output too.
  const std::vector<Tensor> cross_inputs{leaf({2, 2, 4}), leaf({2, 3, 4}), leaf({2, 3, 4})};
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        const auto result =
            attention.forward(in[0], in[1], in[2], {.key_padding_mask = padding, .is_causal = true, .need_weights = true});
        return add(result.output.sum(), result.weights.pow(2.0).sum());
      },
      cross_inputs);
}

TEST_CASE("MultiHeadAttention: errors name the module and the shapes") {
  CHECK_THROWS_WITH_ALL(nn::MultiHeadAttention(10, 3), "MultiHeadAttention(d_model=10, num_heads=3)",
                        "d_model (10) must be divisible by num_heads (3)");
  CHECK_THROWS_WITH_ALL(nn::MultiHeadAttention(8, 2, 1.0), "MultiHeadAttention(d_model=8, num_heads=2)", "dropout",
                        "[0, 1)");
  CHECK_THROWS_WITH_ALL(nn::MultiHeadAttention(8, 0), "MultiHeadAttention(d_model=8, num_heads=0)", "positive");

  nn::MultiHeadAttention attention(8, 2);
  const Tensor x = randn({2, 3, 8});
  const char* name = "MultiHeadAttention(d_model=8, num_heads=2)";
  CHECK_THROWS_WITH_ALL(attention.forward(randn({3, 8}), x, x), name, "expected query [batch, L, 8], got [3, 8]");
  CHECK_THROWS_WITH_ALL(attention.forward(randn({2, 3, 6}), x, x), name, "expected query [batch, L, 8], got [2, 3, 6]");
  CHECK_THROWS_WITH_ALL(attention.forward(x, randn({2, 3, 4}), x), name, "expected key [batch, S, 8], got [2, 3, 4]");
  CHECK_THROWS_WITH_ALL(attention.forward(x, x, randn({2, 4, 8})), name, "value [2, 4, 8]", "key [2, 3, 8]");
  CHECK_THROWS_WITH_ALL(attention.forward(x, randn({1, 3, 8}), randn({1, 3, 8})), name, "query [2, 3, 8]",
                        "key [1, 3, 8]", "batch size");
  CHECK_THROWS_WITH_ALL(attention.forward(x, x, x, {.key_padding_mask = zeros({2, 4}, kBool)}), name,
                        "expected key_padding_mask [batch, S] = [2, 3], got [2, 4]");
  CHECK_THROWS_WITH_ALL(attention.forward(x, x, x, {.key_padding_mask = zeros({2, 3})}), name,
                        "key_padding_mask must be bool", "float32");
  CHECK_THROWS_WITH_ALL(attention.forward(x, x, x, {.attn_mask = zeros({3, 4}, kBool)}), name,
                        "expected attn_mask [L, S] = [3, 3] or [batch, num_heads, L, S] = [2, 2, 3, 3], got [3, 4]");
  CHECK_THROWS_WITH_ALL(attention.forward(x, x, x, {.attn_mask = zeros({3, 3}, kInt64)}), name,
                        "attn_mask must be bool", "int64");
  CHECK_THROWS_WITH_ALL(attention.forward(x, x, x, {.attn_mask = ones({3, 3}, kBool), .is_causal = true}), name,
                        "either attn_mask or is_causal");
  CHECK_THROWS_WITH_ALL(attention.forward(Tensor(), x, x), name, "undefined");
}

TEST_CASE("split_heads and attend_heads: the heads' attention of MultiHeadAttention and BERT, written once") {
  manual_seed(21);
  const int64_t batch = 2, length = 5, heads = 3, head_dim = 4;
  const Tensor x = randn({batch, length, heads * head_dim}, kFloat64);
  const Tensor split = nn::split_heads(x, heads);
  CHECK(split.sizes() == Shape{batch, heads, length, head_dim});
  CHECK(split.select(1, 2).select(1, 3).to_vector<double>() ==
        x.select(1, 3).narrow(1, 2 * head_dim, head_dim).contiguous().view({batch, head_dim}).to_vector<double>());

  const Tensor q = nn::split_heads(randn({batch, length, heads * head_dim}, kFloat64), heads);
  const Tensor k = nn::split_heads(randn({batch, 7, heads * head_dim}, kFloat64), heads);
  const Tensor v = nn::split_heads(randn({batch, 7, heads * head_dim}, kFloat64), heads);
  const Tensor padding = tensor({true, true, true, true, true, false, false,  //
                                 true, true, true, true, true, true, true},
                                {batch, 1, 1, 7});
  const AttentionOptions options{.attn_mask = padding};
  // Each head attended alone, then the heads side by side: what attend_heads merges.
  const AttentionResult reference = scaled_dot_product_attention_with_weights(q, k, v, options);
  const Tensor merged = reference.output.transpose(1, 2).reshape({batch, length, heads * head_dim});
  Tensor weights;
  const Tensor with_weights = nn::attend_heads(q, k, v, options, &weights);
  const Tensor fused = nn::attend_heads(q, k, v, options);
  CHECK(with_weights.sizes() == Shape{batch, length, heads * head_dim});
  check_close(with_weights, merged, 0, 0);
  check_close(fused, merged, 1e-12, 0);
  check_close(weights, reference.weights, 0, 0);
  CHECK(weights.sizes() == Shape{batch, heads, length, 7});
  CHECK(max_abs(weights.select(0, 0).narrow(-1, 5, 2)) == 0.0);  // the padded keys
}
