// [003, 004] einsum self-attention and the post-LN TransformerBlock of the notebooks, and Peter
// Bloem's classifier, built in ember as they are written, and compared with the built-ins.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checks.h"
#include "ember.h"
#include "tutorials.h"

namespace ember::from_pytorch_tutorials {
namespace {

namespace einsum_attention {

// SelfAttention: bias-free projections, heads split with reshape, and both products of attention
// written as einsum. Its arguments come in the order values, keys, query. mask is bool,
// broadcastable to [N, heads, query_len, key_len], true where a query may attend.
class SelfAttention : public nn::Module {
 public:
  SelfAttention(int64_t embed_size, int64_t heads) : Module("SelfAttention"), heads(heads) {
    head_dim = embed_size / heads;
    EMBER_CHECK(head_dim * heads == embed_size, "SelfAttention: embed_size {} is not divisible by heads {}",
                embed_size, heads);
    values = register_module("values", std::make_shared<nn::Linear>(embed_size, embed_size, /*bias=*/false));
    keys = register_module("keys", std::make_shared<nn::Linear>(embed_size, embed_size, /*bias=*/false));
    queries = register_module("queries", std::make_shared<nn::Linear>(embed_size, embed_size, /*bias=*/false));
    fc_out = register_module("fc_out", std::make_shared<nn::Linear>(embed_size, embed_size, /*bias=*/false));
  }
  Tensor forward(const Tensor& value_in, const Tensor& key_in, const Tensor& query_in, const Tensor& mask) {
    const int64_t n = query_in.size(0);
    const Tensor v = values->forward(value_in).reshape({n, value_in.size(1), heads, head_dim});
    const Tensor k = keys->forward(key_in).reshape({n, key_in.size(1), heads, head_dim});
    const Tensor q = queries->forward(query_in).reshape({n, query_in.size(1), heads, head_dim});
    Tensor scores = einsum("nqhd,nkhd->nhqk", {q, k});  // [N, heads, query_len, key_len]
    if (mask.defined()) scores = masked_fill(scores, logical_not(mask), -1e20);
    const Tensor attention = softmax(div(scores, std::sqrt(static_cast<double>(head_dim))), 3);
    const Tensor out = einsum("nhql,nlhd->nqhd", {attention, v});  // [N, query_len, heads, head_dim]
    return fc_out->forward(out.reshape({n, query_in.size(1), heads * head_dim}));
  }
  int64_t heads, head_dim;
  std::shared_ptr<nn::Linear> values, keys, queries, fc_out;
};

// TransformerBlock in post-LN form: attention, add the query back, normalise, dropout; the
// feed-forward network (Linear, GELU, Linear in a Sequential), add, normalise, dropout.
// (In the notebook, forward is indented inside __init__; this is the method it meant.)
class TransformerBlock : public nn::Module {
 public:
  TransformerBlock(int64_t embed_size, int64_t heads, double dropout_p, int64_t forward_expansion)
      : Module("TransformerBlock") {
    attention = register_module("attention", std::make_shared<SelfAttention>(embed_size, heads));
    norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(embed_size));
    norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(embed_size));
    feed_forward = register_module(
        "feed_forward", std::make_shared<nn::Sequential>(
                            std::make_shared<nn::Linear>(embed_size, forward_expansion * embed_size),
                            std::make_shared<nn::GELU>(),
                            std::make_shared<nn::Linear>(forward_expansion * embed_size, embed_size)));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout_p));
  }
  Tensor forward(const Tensor& value, const Tensor& key, const Tensor& query, const Tensor& mask) {
    const Tensor attended = attention->forward(value, key, query, mask);
    const Tensor x = dropout->forward(norm1->forward(add(attended, query)));
    return dropout->forward(norm2->forward(add(feed_forward->forward(x), x)));
  }
  std::shared_ptr<SelfAttention> attention;
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::Sequential> feed_forward;
  std::shared_ptr<nn::Dropout> dropout;
};

const std::vector<std::pair<std::string, std::string>> kBuiltInNames = {
    {"attention.", "self_attn."},         {"queries.", "q_proj."},
    {"keys.", "k_proj."},                 {"values.", "v_proj."},
    {"fc_out.", "out_proj."},             {"feed_forward.0.", "feed_forward.linear1."},
    {"feed_forward.2.", "feed_forward.linear2."},
};

}  // namespace einsum_attention

}  // namespace

void einsum_notebooks() {
  using namespace einsum_attention;
  const int64_t embed_size = 256, heads = 8, forward_expansion = 4, batch = 2, length = 6;
  const double dropout = 0.1;
  const Tensor x = randn({batch, length, embed_size});
  // The second sequence's last two positions are padding.
  const Tensor padding = tensor({false, false, false, false, false, false, false, false, false, false, true, true},
                                {batch, length});
  const Tensor keep = logical_not(padding).unsqueeze(1).unsqueeze(1);  // the notebook's [N, 1, 1, key_len] mask
  const int64_t attention_count = 4 * embed_size * embed_size;

  heading("003", "SelfAttention with einsum -> nn::MultiHeadAttention(embed, heads, 0.0, bias = false)");
  {
    SelfAttention hand_built(embed_size, heads);
    nn::MultiHeadAttention built_in(embed_size, heads, 0.0, /*bias=*/false);
    check_parameters("hand-built", hand_built, attention_count);
    check_parameters("built-in", built_in, attention_count);
    built_in.load_state_dict(renamed(hand_built.state_dict(), kBuiltInNames));
    const Tensor output = hand_built.forward(x, x, x, keep);
    check_shape("output", output, {batch, length, embed_size});
    // ember takes (query, key, value), the notebook (values, keys, query).
    check_same("vs the built-in with key_padding_mask", output,
               built_in.forward(x, x, x, {.key_padding_mask = padding}).output);
  }

  heading("003/004", "TransformerBlock (post-LN) -> nn::TransformerEncoderLayer, norm_first = false");
  {
    // The notebook's attention has no biases; the built-in layer's has, so they are loaded as
    // zeros. Dropout sits after each norm in the notebook and before each residual add in
    // ember: the same in eval(). Bloem's block [004] is the same with ReLU and no dropout:
    // {.activation = nn::Activation::ReLU, .dropout = 0.0}.
    TransformerBlock hand_built(embed_size, heads, dropout, forward_expansion);
    const int64_t d_ff = forward_expansion * embed_size;
    nn::TransformerEncoderLayer built_in({.d_model = embed_size,
                                          .num_heads = heads,
                                          .d_ff = d_ff,
                                          .dropout = dropout,
                                          .activation = nn::Activation::GELU,
                                          .norm_first = false});
    const int64_t block_count = attention_count + 2 * embed_size * d_ff + d_ff + embed_size + 4 * embed_size;
    check_parameters("hand-built", hand_built, block_count);
    check_parameters("built-in (with attention biases)", built_in, block_count + 4 * embed_size);
    nn::StateDict state = renamed(hand_built.state_dict(), kBuiltInNames);
    for (const char* projection : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      state[fmt::format("self_attn.{}.bias", projection)] = zeros({embed_size});
    }
    built_in.load_state_dict(state);
    hand_built.eval();
    built_in.eval();
    const Tensor output = hand_built.forward(x, x, x, keep);
    check_shape("output", output, {batch, length, embed_size});
    check_same("vs the built-in, in eval()", output, built_in.forward(x, {.key_padding_mask = padding}));
  }

  heading("004", "Bloem's Transformer classifier -> nn::TransformerClassifier, Pooling::Mean, then log_softmax");
  {
    // Learned positions added to the tokens, post-LN ReLU blocks, the mean over positions, a
    // Linear, log_softmax. One difference in kind: Bloem's attention gives every head all k
    // dims ("wide" heads, projections k -> heads * k); ember's splits k among the heads, the
    // narrow form his notes also describe, so ember's model has fewer parameters.
    const int64_t k = 128, depth = 2, seq_length = 32, num_tokens = 1000, num_classes = 2;
    nn::TransformerClassifierOptions options;
    options.vocab_size = num_tokens;
    options.max_len = seq_length;
    options.num_classes = num_classes;
    options.num_layers = depth;
    options.layer = {.d_model = k, .num_heads = heads, .d_ff = 4 * k, .dropout = 0.0, .norm_first = false};
    options.pooling = nn::Pooling::Mean;
    options.embedding_norm = false;
    options.padding_idx = std::nullopt;
    nn::TransformerClassifier model(options);
    const int64_t layer_count = 4 * (k * k + k) + (2 * k * 4 * k + 4 * k + k) + 4 * k;
    check_parameters("built-in", model, (num_tokens + seq_length) * k + depth * layer_count + k * num_classes +
                                            num_classes);
    const Tensor log_probabilities = log_softmax(model.forward(randint(0, num_tokens, {batch, seq_length})), 1);
    check_shape("log-probabilities", log_probabilities, {batch, num_classes});
    check_same("each row's probabilities sum to 1", sum(exp(log_probabilities), {1}), ones({batch}), 1e-5);
  }
}

}  // namespace ember::from_pytorch_tutorials
