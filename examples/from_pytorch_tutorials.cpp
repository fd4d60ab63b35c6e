// Worked example 8, "From the PyTorch tutorials to ember": each class the transformer tutorials
// define, written again in ember, next to the built-in nn module that computes the same thing.
//
//   ./build/examples/from_pytorch_tutorials [--seed S]
//
// The tutorials (see examples/README.md):
//   [000, 001] "NLP with Transformers", chapter 3: AttentionHead, MultiHeadAttention, FeedForward,
//              TransformerEncoderLayer, Embeddings, TransformerForSequenceClassification
//   [002]      "Attention Is All You Need" from scratch: InputEmbeddings, PositionalEncoding,
//              LayerNormalization, FeedForward, MultiHeadAttention, ResidualConnection,
//              EncoderBlock, DecoderBlock
//   [003, 004] einsum self-attention and the post-LN TransformerBlock; Peter Bloem's classifier
//
// For each class: a small ember Module written the way the tutorial writes it (same parts, same
// names), a run on a small input whose output shape and parameter count are checked, and, where
// ember has a built-in for it, the built-in loaded with the hand-built module's weights and
// shown to give the same output. The guide is compiled with the library, so an API change that
// breaks it breaks the build, and a behaviour change fails its checks: exit status 1.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/run_main.h"
#include "ember.h"

using namespace ember;

namespace {

// ---- checks ----------------------------------------------------------------------------------

int failed_checks = 0;

std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return text;
}

void heading(const std::string& source, const std::string& title) { fmt::print("\n[{}] {}\n", source, title); }

void check_shape(const std::string& what, const Tensor& t, const Shape& expected) {
  const bool ok = t.sizes() == expected;
  fmt::print("  {} {} (expected {}) {}\n", what, shape_str(t.sizes()), shape_str(expected), ok ? "ok" : "MISMATCH");
  if (!ok) ++failed_checks;
}

void check_parameters(const std::string& what, const nn::Module& module, int64_t expected) {
  const int64_t count = module.num_parameters();
  const bool ok = count == expected;
  fmt::print("  {}: {} parameters (expected {}) {}\n", what, grouped(count), grouped(expected),
             ok ? "ok" : "MISMATCH");
  if (!ok) ++failed_checks;
}

// Float32 arithmetic done in a different order differs in the last bits; `tolerance` bounds
// the largest elementwise difference.
void check_same(const std::string& what, const Tensor& a, const Tensor& b, double tolerance = 1e-4) {
  const bool same_shape = a.sizes() == b.sizes();
  const double difference = same_shape ? max(abs(sub(a, b))).item() : INFINITY;
  const bool ok = difference <= tolerance;
  fmt::print("  {}: max difference {:.2g} {}\n", what, difference, ok ? "ok" : "MISMATCH");
  if (!ok) ++failed_checks;
}

// A hand-built module's state dict under the built-in module's names: each rule replaces the
// first occurrence of its left side in a key. Loading the result with strict checking also
// proves the mapping complete: a name left over or missing throws, naming it.
nn::StateDict renamed(const nn::StateDict& state, const std::vector<std::pair<std::string, std::string>>& rules) {
  nn::StateDict result;
  for (const auto& [key, value] : state) {
    std::string name = key;
    for (const auto& [from, to] : rules) {
      const size_t at = name.find(from);
      if (at != std::string::npos) name.replace(at, from.size(), to);
    }
    result[name] = value;
  }
  return result;
}

// ---- [000, 001] "NLP with Transformers", chapter 3 -------------------------------------------
namespace nlp_with_transformers {

// The configuration the chapter reads from bert-base-uncased with AutoConfig.
struct Config {
  int64_t hidden_size = 768;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  int64_t vocab_size = 30522;
  int64_t max_position_embeddings = 512;
  int64_t num_hidden_layers = 12;
  double hidden_dropout_prob = 0.1;
  int64_t num_labels = 3;
};

// The chapter's scaled_dot_product_attention: batched products of queries with transposed keys,
// divided by sqrt(d_k), softmax over the keys, then the weighted sum of the values.
Tensor dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value) {
  const double dim_k = static_cast<double>(query.size(-1));
  const Tensor scores = div(bmm(query, key.transpose(1, 2)), std::sqrt(dim_k));
  return bmm(softmax(scores, -1), value);
}

// AttentionHead: three Linear maps from the embedding to one head's queries, keys and values.
class AttentionHead : public nn::Module {
 public:
  AttentionHead(int64_t embed_dim, int64_t head_dim) : Module("AttentionHead") {
    q = register_module("q", std::make_shared<nn::Linear>(embed_dim, head_dim));
    k = register_module("k", std::make_shared<nn::Linear>(embed_dim, head_dim));
    v = register_module("v", std::make_shared<nn::Linear>(embed_dim, head_dim));
  }
  Tensor forward(const Tensor& hidden_state) {
    return dot_product_attention(q->forward(hidden_state), k->forward(hidden_state), v->forward(hidden_state));
  }
  std::shared_ptr<nn::Linear> q, k, v;
};

// MultiHeadAttention: num_heads AttentionHeads of hidden_size / num_heads dims each, their
// outputs concatenated and mixed by one more Linear.
class MultiHeadAttention : public nn::Module {
 public:
  explicit MultiHeadAttention(const Config& config) : Module("MultiHeadAttention") {
    const int64_t embed_dim = config.hidden_size;
    const int64_t head_dim = embed_dim / config.num_attention_heads;
    heads = register_module("heads", std::make_shared<nn::ModuleList>());
    for (int64_t h = 0; h < config.num_attention_heads; ++h) {
      heads->push_back(std::make_shared<AttentionHead>(embed_dim, head_dim));
    }
    output_linear = register_module("output_linear", std::make_shared<nn::Linear>(embed_dim, embed_dim));
  }
  Tensor forward(const Tensor& hidden_state) {
    std::vector<Tensor> per_head;
    for (size_t h = 0; h < heads->size(); ++h) per_head.push_back(head(h).forward(hidden_state));
    return output_linear->forward(cat(per_head, -1));
  }
  AttentionHead& head(size_t h) const { return *heads->at<AttentionHead>(h); }
  std::shared_ptr<nn::ModuleList> heads;
  std::shared_ptr<nn::Linear> output_linear;
};

// nn::MultiHeadAttention keeps one q_proj for all heads: head h's rows are rows
// h * head_dim .. (h + 1) * head_dim of q_proj.weight. Stacking the heads' weights in order
// therefore gives the built-in exactly the chapter's computation.
nn::StateDict built_in_attention_state(const MultiHeadAttention& attention, const std::string& prefix = "") {
  nn::StateDict state;
  for (const char* part : {"q", "k", "v"}) {
    std::vector<Tensor> weights, biases;
    for (size_t h = 0; h < attention.heads->size(); ++h) {
      const nn::StateDict head = attention.head(h).state_dict();
      weights.push_back(head.at(fmt::format("{}.weight", part)));
      biases.push_back(head.at(fmt::format("{}.bias", part)));
    }
    state[fmt::format("{}{}_proj.weight", prefix, part)] = cat(weights, 0);
    state[fmt::format("{}{}_proj.bias", prefix, part)] = cat(biases, 0);
  }
  state[prefix + "out_proj.weight"] = attention.output_linear->weight;
  state[prefix + "out_proj.bias"] = attention.output_linear->bias;
  return state;
}

// FeedForward: Linear up to intermediate_size, GELU, Linear back down, dropout.
class FeedForward : public nn::Module {
 public:
  explicit FeedForward(const Config& config) : Module("FeedForward") {
    linear_1 = register_module("linear_1", std::make_shared<nn::Linear>(config.hidden_size, config.intermediate_size));
    linear_2 = register_module("linear_2", std::make_shared<nn::Linear>(config.intermediate_size, config.hidden_size));
    gelu = register_module("gelu", std::make_shared<nn::GELU>());
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(config.hidden_dropout_prob));
  }
  Tensor forward(const Tensor& x) { return dropout->forward(linear_2->forward(gelu->forward(linear_1->forward(x)))); }
  std::shared_ptr<nn::Linear> linear_1, linear_2;
  std::shared_ptr<nn::GELU> gelu;
  std::shared_ptr<nn::Dropout> dropout;
};

// TransformerEncoderLayer in pre-LN form: each sublayer reads a normalised copy of x and adds
// its result to x.
class TransformerEncoderLayer : public nn::Module {
 public:
  explicit TransformerEncoderLayer(const Config& config) : Module("TransformerEncoderLayer") {
    layer_norm_1 = register_module("layer_norm_1", std::make_shared<nn::LayerNorm>(config.hidden_size));
    layer_norm_2 = register_module("layer_norm_2", std::make_shared<nn::LayerNorm>(config.hidden_size));
    attention = register_module("attention", std::make_shared<MultiHeadAttention>(config));
    feed_forward = register_module("feed_forward", std::make_shared<FeedForward>(config));
  }
  Tensor forward(const Tensor& x) {
    const Tensor h = add(x, attention->forward(layer_norm_1->forward(x)));
    return add(h, feed_forward->forward(layer_norm_2->forward(h)));
  }
  std::shared_ptr<nn::LayerNorm> layer_norm_1, layer_norm_2;
  std::shared_ptr<MultiHeadAttention> attention;
  std::shared_ptr<FeedForward> feed_forward;
};

// Adds a hand-built layer's weights to `state` under nn::TransformerEncoderLayer's names, each
// prefixed with `to` ("encoder.layers.3." inside a classifier).
void add_built_in_layer_state(nn::StateDict& state, const TransformerEncoderLayer& layer, const std::string& to) {
  state.merge(built_in_attention_state(*layer.attention, to + "self_attn."));
  const nn::StateDict rest = renamed(layer.state_dict(), {{"layer_norm_1.", "norm1."},
                                                          {"layer_norm_2.", "norm2."},
                                                          {"linear_1.", "linear1."},
                                                          {"linear_2.", "linear2."}});
  for (const auto& [name, value] : rest) {
    if (!name.starts_with("attention.")) state[to + name] = value;
  }
}

// Embeddings: a learned vector per token and one per position, added, normalised, dropped out.
class Embeddings : public nn::Module {
 public:
  explicit Embeddings(const Config& config) : Module("Embeddings") {
    token_embeddings =
        register_module("token_embeddings", std::make_shared<nn::Embedding>(config.vocab_size, config.hidden_size));
    position_embeddings = register_module(
        "position_embeddings", std::make_shared<nn::Embedding>(config.max_position_embeddings, config.hidden_size));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(config.hidden_size, 1e-12));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(0.5));  // nn.Dropout()'s default p
  }
  Tensor forward(const Tensor& input_ids) {
    const Tensor position_ids = arange(static_cast<double>(input_ids.size(1)), kInt64).unsqueeze(0);
    const Tensor embeddings = add(token_embeddings->forward(input_ids), position_embeddings->forward(position_ids));
    return dropout->forward(norm->forward(embeddings));
  }
  std::shared_ptr<nn::Embedding> token_embeddings, position_embeddings;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Dropout> dropout;
};

// TransformerEncoder: the embeddings, then num_hidden_layers encoder layers.
class TransformerEncoder : public nn::Module {
 public:
  explicit TransformerEncoder(const Config& config) : Module("TransformerEncoder") {
    embeddings = register_module("embeddings", std::make_shared<Embeddings>(config));
    layers = register_module("layers", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
      layers->push_back(std::make_shared<TransformerEncoderLayer>(config));
    }
  }
  Tensor forward(const Tensor& input_ids) {
    Tensor x = embeddings->forward(input_ids);
    for (size_t i = 0; i < layers->size(); ++i) x = layers->at<TransformerEncoderLayer>(i)->forward(x);
    return x;
  }
  std::shared_ptr<Embeddings> embeddings;
  std::shared_ptr<nn::ModuleList> layers;
};

// TransformerForSequenceClassification (the book's name; notebook 001 calls it
// TransformerClassifier): the encoder's state of the first token, dropout, and a Linear to one
// logit per label.
class TransformerForSequenceClassification : public nn::Module {
 public:
  explicit TransformerForSequenceClassification(const Config& config)
      : Module("TransformerForSequenceClassification") {
    encoder = register_module("encoder", std::make_shared<TransformerEncoder>(config));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(config.hidden_dropout_prob));
    classifier = register_module("classifier", std::make_shared<nn::Linear>(config.hidden_size, config.num_labels));
  }
  Tensor forward(const Tensor& input_ids) {
    const Tensor first_token = encoder->forward(input_ids).select(1, 0);
    return classifier->forward(dropout->forward(first_token));
  }
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> classifier;
};

}  // namespace nlp_with_transformers

// ---- [002] "Attention Is All You Need" from scratch ------------------------------------------
namespace from_scratch {

// InputEmbeddings: the token's vector times sqrt(d_model), so that it is not drowned by the
// positional encoding added to it.
class InputEmbeddings : public nn::Module {
 public:
  InputEmbeddings(int64_t d_model, int64_t vocab_size) : Module("InputEmbeddings"), d_model(d_model) {
    embed = register_module("embed", std::make_shared<nn::Embedding>(vocab_size, d_model));
  }
  Tensor forward(const Tensor& ids) { return mul(embed->forward(ids), std::sqrt(static_cast<double>(d_model))); }
  int64_t d_model;
  std::shared_ptr<nn::Embedding> embed;
};

// PositionalEncoding: the paper's sinusoids, pe[pos, 2i] = sin(pos / 10000^(2i / d_model)) and
// pe[pos, 2i + 1] = cos(the same), kept as a buffer (saved with the model, never trained),
// added to the first seq_len positions, then dropout.
class PositionalEncoding : public nn::Module {
 public:
  PositionalEncoding(int64_t d_model, int64_t seq_length, double dropout_p) : Module("PositionalEncoding") {
    const Tensor position = arange(static_cast<double>(seq_length)).unsqueeze(1);  // [seq_length, 1]
    // 1 / 10000^(2i / d_model) computed as exp(-2i ln(10000) / d_model), for 2i = 0, 2, 4, ...
    const Tensor inverse_frequency =
        exp(mul(arange(0.0, static_cast<double>(d_model), 2.0), -std::log(10000.0) / static_cast<double>(d_model)));
    const Tensor angle = mul(position, inverse_frequency);  // [seq_length, d_model / 2]
    // Pair each sin with its cos along a new last dim and flatten the pairs: the sines land in
    // the even columns and the cosines in the odd ones, as pe[:, 0::2] and pe[:, 1::2] do.
    const Tensor table = stack({sin(angle), cos(angle)}, 2).reshape({seq_length, d_model});
    pe = register_buffer("pe", table.unsqueeze(0));  // [1, seq_length, d_model]
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout_p));
  }
  Tensor forward(const Tensor& x) { return dropout->forward(add(x, pe.narrow(1, 0, x.size(1)))); }
  Tensor pe;
  std::shared_ptr<nn::Dropout> dropout;
};

// LayerNormalization as this tutorial writes it, which is not torch.nn.LayerNorm: one scalar
// gain and one scalar bias for all features, the unbiased standard deviation (divides by n - 1),
// and eps added to the standard deviation rather than to the variance.
class LayerNormalization : public nn::UnaryModule {
 public:
  explicit LayerNormalization(double epsilon = 1e-6) : UnaryModule("LayerNormalization"), epsilon(epsilon) {
    gamma = register_parameter("gamma", ones({1}));
    beta = register_parameter("beta", zeros({1}));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor mean_ = mean(x, {-1}, /*keepdim=*/true);
    const Tensor std_ = ember::std(x, {-1}, /*unbiased=*/true, /*keepdim=*/true);
    return add(div(mul(gamma, sub(x, mean_)), add(std_, epsilon)), beta);
  }
  double epsilon;
  Tensor gamma, beta;
};

// FeedForward: Linear, ReLU, dropout on the hidden layer, Linear.
class FeedForward : public nn::Module {
 public:
  FeedForward(int64_t d_model, int64_t d_ff, double dropout_p) : Module("FeedForward") {
    linear_1 = register_module("linear_1", std::make_shared<nn::Linear>(d_model, d_ff));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout_p));
    linear_2 = register_module("linear_2", std::make_shared<nn::Linear>(d_ff, d_model));
  }
  Tensor forward(const Tensor& x) { return linear_2->forward(dropout->forward(relu(linear_1->forward(x)))); }
  std::shared_ptr<nn::Linear> linear_1, linear_2;
  std::shared_ptr<nn::Dropout> dropout;
};

// MultiHeadAttention: project queries, keys and values with one d_model x d_model Linear each,
// view the result as h heads of d_k dims, attend in every head at once, merge the heads and
// project with w_o. mask is bool, broadcastable to [batch, h, L, S], true where a query may
// attend (the tutorial's `mask == 0` marks the blocked places).
//
// Two slips in the tutorial's code are not carried over: it calls masked_fill without using
// its result, so its mask never takes effect, and it writes query.size[0] for query.size(0).
class MultiHeadAttention : public nn::Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t h, double dropout_p) : Module("MultiHeadAttention"), h(h) {
    EMBER_CHECK(d_model % h == 0, "MultiHeadAttention: d_model {} is not divisible by h {}", d_model, h);
    d_k = d_model / h;
    w_q = register_module("w_q", std::make_shared<nn::Linear>(d_model, d_model));
    w_k = register_module("w_k", std::make_shared<nn::Linear>(d_model, d_model));
    w_v = register_module("w_v", std::make_shared<nn::Linear>(d_model, d_model));
    w_o = register_module("w_o", std::make_shared<nn::Linear>(d_model, d_model));
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout_p));
  }
  Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
    // [batch, length, d_model] -> [batch, h, length, d_k]
    auto split_heads = [&](const Tensor& t) { return t.view({t.size(0), t.size(1), h, d_k}).transpose(1, 2); };
    const Tensor query = split_heads(w_q->forward(q));
    const Tensor key = split_heads(w_k->forward(k));
    const Tensor value = split_heads(w_v->forward(v));
    Tensor scores = div(matmul(query, key.transpose(-2, -1)), std::sqrt(static_cast<double>(d_k)));
    if (mask.defined()) scores = masked_fill(scores, logical_not(mask), -1e9);
    const Tensor weights = dropout->forward(softmax(scores, -1));
    const Tensor x = matmul(weights, value).transpose(1, 2).contiguous();  // [batch, length, h, d_k]
    return w_o->forward(x.view({x.size(0), x.size(1), h * d_k}));
  }
  int64_t h, d_k;
  std::shared_ptr<nn::Linear> w_q, w_k, w_v, w_o;
  std::shared_ptr<nn::Dropout> dropout;
};

using Sublayer = std::function<Tensor(const Tensor&)>;
// Which normalisation the residual connections use. The tutorial's is LayerNormalization; built
// with nn::LayerNorm instead, the blocks below compute exactly what ember's pre-LN layers do.
using MakeNorm = std::function<std::shared_ptr<nn::UnaryModule>()>;

// ResidualConnection in pre-norm form: x + dropout(sublayer(norm(x))).
class ResidualConnection : public nn::Module {
 public:
  ResidualConnection(double dropout_p, const MakeNorm& make_norm) : Module("ResidualConnection") {
    dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout_p));
    norm = register_module("norm", make_norm());
  }
  Tensor forward(const Tensor& x, const Sublayer& sublayer) {
    return add(x, dropout->forward(sublayer(norm->forward(x))));
  }
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::UnaryModule> norm;
};

// EncoderBlock: self-attention and the feed-forward network, each inside a ResidualConnection.
// As in the tutorial, the sublayers are made outside and handed in.
class EncoderBlock : public nn::Module {
 public:
  EncoderBlock(std::shared_ptr<MultiHeadAttention> self_attention, std::shared_ptr<FeedForward> feed_forward_block,
               double dropout_p, const MakeNorm& make_norm)
      : Module("EncoderBlock") {
    self_attn = register_module("self_attn", std::move(self_attention));
    feed_forward = register_module("feed_forward", std::move(feed_forward_block));
    residual_connection = register_module("residual_connection", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < 2; ++i) {
      residual_connection->push_back(std::make_shared<ResidualConnection>(dropout_p, make_norm));
    }
  }
  Tensor forward(const Tensor& x, const Tensor& mask) {
    const Tensor h = residual(0).forward(x, [&](const Tensor& y) { return self_attn->forward(y, y, y, mask); });
    return residual(1).forward(h, [&](const Tensor& y) { return feed_forward->forward(y); });
  }
  ResidualConnection& residual(size_t i) const { return *residual_connection->at<ResidualConnection>(i); }
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<FeedForward> feed_forward;
  std::shared_ptr<nn::ModuleList> residual_connection;
};

// DecoderBlock: masked self-attention over the target, attention to the encoder's output, and
// the feed-forward network, each inside a ResidualConnection.
class DecoderBlock : public nn::Module {
 public:
  DecoderBlock(std::shared_ptr<MultiHeadAttention> self_attention, std::shared_ptr<MultiHeadAttention> cross_attention,
               std::shared_ptr<FeedForward> feed_forward_block, double dropout_p, const MakeNorm& make_norm)
      : Module("DecoderBlock") {
    self_attn = register_module("self_attn", std::move(self_attention));
    cross_attn = register_module("cross_attn", std::move(cross_attention));
    feed_forward = register_module("feed_forward", std::move(feed_forward_block));
    residual_connection = register_module("residual_connection", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < 3; ++i) {
      residual_connection->push_back(std::make_shared<ResidualConnection>(dropout_p, make_norm));
    }
  }
  Tensor forward(const Tensor& x, const Tensor& encoder_output, const Tensor& source_mask, const Tensor& target_mask) {
    Tensor h = residual(0).forward(x, [&](const Tensor& y) { return self_attn->forward(y, y, y, target_mask); });
    h = residual(1).forward(
        h, [&](const Tensor& y) { return cross_attn->forward(y, encoder_output, encoder_output, source_mask); });
    return residual(2).forward(h, [&](const Tensor& y) { return feed_forward->forward(y); });
  }
  ResidualConnection& residual(size_t i) const { return *residual_connection->at<ResidualConnection>(i); }
  std::shared_ptr<MultiHeadAttention> self_attn, cross_attn;
  std::shared_ptr<FeedForward> feed_forward;
  std::shared_ptr<nn::ModuleList> residual_connection;
};

// The built-in layers' names for this tutorial's parts.
const std::vector<std::pair<std::string, std::string>> kBuiltInNames = {
    {"w_q.", "q_proj."},       {"w_k.", "k_proj."},       {"w_v.", "v_proj."},
    {"w_o.", "out_proj."},     {"linear_1.", "linear1."}, {"linear_2.", "linear2."},
    {"residual_connection.0.norm.", "norm1."},
    {"residual_connection.1.norm.", "norm2."},
    {"residual_connection.2.norm.", "norm3."},
};

}  // namespace from_scratch

// ---- [003, 004] einsum self-attention, post-LN blocks, Peter Bloem's classifier ---------------
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

// ---- the guide -------------------------------------------------------------------------------

void chapter_three() {
  using namespace nlp_with_transformers;
  const Config config;
  const int64_t hidden = config.hidden_size, heads = config.num_attention_heads, head_dim = hidden / heads;
  const int64_t ffn = config.intermediate_size;

  // "the bark of a palm tree is very rough" as bert-base-uncased's WordPiece ids, without
  // [CLS] and [SEP], as the chapter tokenises it.
  const Tensor input_ids = tensor<int64_t>({1996, 11286, 1997, 1037, 5340, 3392, 2003, 2200, 5931}, {1, 9});
  // The chapter starts from a bare nn.Embedding(30522, 768); the Embeddings module it builds
  // later holds the same table, so one is made here and its table stands in for the bare one
  // (a 23-million-entry table takes seconds to fill with random numbers).
  Embeddings embeddings(config);
  const Tensor inputs_embeds = embeddings.token_embeddings->forward(input_ids);
  heading("000/001", "token embeddings: nn.Embedding(30522, 768) -> nn::Embedding(30522, 768)");
  check_shape("inputs_embeds", inputs_embeds, {1, 9, hidden});

  heading("000/001", "AttentionHead -> one head's slice of nn::MultiHeadAttention");
  {
    // One head alone has no built-in module; its computation is ember's fused
    // scaled_dot_product_attention applied to the head's three projections.
    AttentionHead head(hidden, head_dim);
    check_parameters("AttentionHead(768, 64)", head, 3 * (hidden * head_dim + head_dim));
    const Tensor output = head.forward(inputs_embeds);
    check_shape("output", output, {1, 9, head_dim});
    const Tensor fused = scaled_dot_product_attention(head.q->forward(inputs_embeds), head.k->forward(inputs_embeds),
                                                      head.v->forward(inputs_embeds));
    check_same("vs ember::scaled_dot_product_attention", output, fused, 1e-5);
  }

  heading("000/001", "MultiHeadAttention -> nn::MultiHeadAttention(768, 12)");
  {
    MultiHeadAttention hand_built(config);
    nn::MultiHeadAttention built_in(hidden, heads);
    check_parameters("hand-built, 12 AttentionHeads + output_linear", hand_built, 4 * (hidden * hidden + hidden));
    check_parameters("nn::MultiHeadAttention(768, 12)", built_in, 4 * (hidden * hidden + hidden));
    built_in.load_state_dict(built_in_attention_state(hand_built));
    const Tensor output = hand_built.forward(inputs_embeds);
    check_shape("output", output, {1, 9, hidden});
    const Tensor expected = built_in.forward(inputs_embeds, inputs_embeds, inputs_embeds).output;
    check_same("vs the built-in with the heads' weights stacked", output, expected);
  }

  heading("000/001", "FeedForward -> nn::FeedForward(768, 3072, Activation::GELU, 0.1)");
  {
    FeedForward hand_built(config);
    nn::FeedForward built_in(hidden, ffn, nn::Activation::GELU, config.hidden_dropout_prob);
    const int64_t expected_count = hidden * ffn + ffn + ffn * hidden + hidden;
    check_parameters("hand-built", hand_built, expected_count);
    check_parameters("built-in", built_in, expected_count);
    built_in.load_state_dict(renamed(hand_built.state_dict(), {{"linear_1.", "linear1."}, {"linear_2.", "linear2."}}));
    // Dropout draws differ between two modules; in eval() both are off and outputs must agree.
    hand_built.eval();
    built_in.eval();
    const Tensor output = hand_built.forward(inputs_embeds);
    check_shape("output", output, {1, 9, hidden});
    check_same("vs the built-in, in eval()", output, built_in.forward(inputs_embeds));
  }

  heading("000/001", "TransformerEncoderLayer (pre-LN) -> nn::TransformerEncoderLayer, norm_first = true");
  {
    TransformerEncoderLayer hand_built(config);
    nn::TransformerEncoderLayer built_in({.d_model = hidden,
                                          .num_heads = heads,
                                          .d_ff = ffn,
                                          .dropout = config.hidden_dropout_prob,
                                          .activation = nn::Activation::GELU,
                                          .norm_first = true});
    const int64_t expected_count = 4 * (hidden * hidden + hidden) + (2 * hidden * ffn + ffn + hidden) + 4 * hidden;
    check_parameters("hand-built", hand_built, expected_count);
    check_parameters("built-in", built_in, expected_count);
    nn::StateDict state;
    add_built_in_layer_state(state, hand_built, "");
    built_in.load_state_dict(state);
    hand_built.eval();
    built_in.eval();
    const Tensor output = hand_built.forward(inputs_embeds);
    check_shape("output", output, {1, 9, hidden});
    check_same("vs the built-in, in eval()", output, built_in.forward(inputs_embeds));
  }

  heading("000/001", "Embeddings -> nn::Embedding + nn::LearnedPositionalEmbedding + nn::LayerNorm + nn::Dropout");
  {
    // ember has no module for this sum of parts on its own: nn::TransformerClassifier holds the
    // same four (token_embedding, position_embedding, embedding_norm, dropout); see below.
    check_parameters("hand-built", embeddings,
                     (config.vocab_size + config.max_position_embeddings) * hidden + 2 * hidden);
    check_shape("output", embeddings.forward(input_ids), {1, 9, hidden});
  }

  heading("000/001", "TransformerForSequenceClassification -> nn::TransformerClassifier, Pooling::Cls");
  {
    // Two whole models at full size would take most of this guide's run time to initialise, so
    // these two are built with 2 layers and a 1,000-token vocabulary, and read 9 ids from that
    // vocabulary; every shape stays the chapter's, and the parameter formula checked here gives
    // the full-size count below.
    Config small = config;
    small.num_hidden_layers = 2;
    small.vocab_size = 1000;
    const Tensor small_ids = randint(0, small.vocab_size, {1, 9});
    TransformerForSequenceClassification hand_built(small);
    // The tutorial's options in ember's words: pre-LN GELU layers with no final norm, a
    // LayerNorm on the embeddings, the first token's state as the sequence vector, and no
    // padding row in the embedding table (nn.Embedding has none unless asked).
    nn::TransformerClassifierOptions options;
    options.vocab_size = small.vocab_size;
    options.max_len = small.max_position_embeddings;
    options.num_classes = small.num_labels;
    options.num_layers = small.num_hidden_layers;
    options.layer = {.d_model = hidden,
                     .num_heads = heads,
                     .d_ff = ffn,
                     .dropout = config.hidden_dropout_prob,
                     .activation = nn::Activation::GELU,
                     .norm_first = true};
    options.pooling = nn::Pooling::Cls;
    options.embedding_norm = true;
    options.final_norm = false;
    options.padding_idx = std::nullopt;
    nn::TransformerClassifier built_in(options);
    const auto parameter_count = [&](const Config& c) {
      const int64_t layer_count = 4 * (hidden * hidden + hidden) + (2 * hidden * ffn + ffn + hidden) + 4 * hidden;
      return (c.vocab_size + c.max_position_embeddings) * hidden + 2 * hidden + c.num_hidden_layers * layer_count +
             hidden * c.num_labels + c.num_labels;
    };
    check_parameters("hand-built, 2 layers, 1,000 tokens", hand_built, parameter_count(small));
    check_parameters("built-in, 2 layers, 1,000 tokens", built_in, parameter_count(small));
    fmt::print("  at the chapter's size (12 layers, 30,522 tokens) both have {} parameters\n",
               grouped(parameter_count(config)));

    const Embeddings& embeddings = *hand_built.encoder->embeddings;
    nn::StateDict state = {
        {"token_embedding.weight", embeddings.token_embeddings->weight},
        {"position_embedding.weight", embeddings.position_embeddings->weight},
        {"embedding_norm.weight", embeddings.norm->weight},
        {"embedding_norm.bias", embeddings.norm->bias},
        {"classifier.weight", hand_built.classifier->weight},
        {"classifier.bias", hand_built.classifier->bias},
    };
    for (size_t i = 0; i < hand_built.encoder->layers->size(); ++i) {
      add_built_in_layer_state(state, *hand_built.encoder->layers->at<TransformerEncoderLayer>(i),
                               fmt::format("encoder.layers.{}.", i));
    }
    built_in.load_state_dict(state);
    hand_built.eval();
    built_in.eval();
    const Tensor logits = hand_built.forward(small_ids);
    check_shape("logits", logits, {1, config.num_labels});
    // One difference remains: the chapter's embedding norm uses eps 1e-12, and ember's
    // classifier uses one eps (layer_norm_eps, 1e-5 here) for every norm. On vectors of
    // variance ~2 that moves the outputs by ~1e-6, inside the tolerance.
    check_same("vs the built-in, in eval()", logits, built_in.forward(small_ids));
  }
}

void attention_is_all_you_need() {
  using namespace from_scratch;
  // The paper's base sizes; a batch of two source sentences of 10 tokens (the second ends in
  // three padding tokens, id 0) and two target prefixes of 7.
  const int64_t d_model = 512, h = 8, d_ff = 2048, vocab_size = 1000, max_len = 64;
  const double dropout = 0.1;
  const Tensor source_ids = tensor<int64_t>({5, 17, 42, 8, 99, 3, 250, 7, 61, 12,  //
                                             9, 33, 4, 870, 15, 26, 2, 0, 0, 0},
                                            {2, 10});
  const Tensor target_ids = randint(1, vocab_size, {2, 7});
  // The tutorial's masks: true where attention is allowed. The source mask hides padding keys
  // ([batch, 1, 1, S]); the target mask lets position i see positions 0..i ([1, 1, T, T]).
  const Tensor source_mask = ne(source_ids, 0.0).unsqueeze(1).unsqueeze(1);
  const Tensor positions = arange(7.0, kInt64);
  const Tensor target_mask = le(positions.unsqueeze(0), positions.unsqueeze(1)).unsqueeze(0).unsqueeze(0);
  // ember's masks say the opposite for padding: key_padding_mask is true at padding.
  const Tensor source_padding = eq(source_ids, 0.0);

  heading("002", "InputEmbeddings -> nn::TokenEmbedding(vocab, d_model, scale_by_sqrt_d_model = true)");
  Tensor source, target;
  {
    InputEmbeddings hand_built(d_model, vocab_size);
    nn::TokenEmbedding built_in(vocab_size, d_model, /*scale_by_sqrt_d_model=*/true);
    check_parameters("hand-built", hand_built, vocab_size * d_model);
    built_in.load_state_dict({{"embedding.weight", hand_built.embed->weight}});
    source = hand_built.forward(source_ids);
    target = hand_built.forward(target_ids);
    check_shape("output", source, {2, 10, d_model});
    check_same("vs the built-in", source, built_in.forward(source_ids), 1e-5);
  }

  heading("002", "PositionalEncoding -> nn::SinusoidalPositionalEncoding(d_model, max_len) + nn::Dropout");
  {
    PositionalEncoding hand_built(d_model, max_len, dropout);
    nn::Sequential built_in(std::make_shared<nn::SinusoidalPositionalEncoding>(d_model, max_len),
                            std::make_shared<nn::Dropout>(dropout));
    check_parameters("hand-built (pe is a buffer, not a parameter)", hand_built, 0);
    hand_built.eval();
    built_in.eval();
    const Tensor output = hand_built.forward(source);
    check_shape("output", output, {2, 10, d_model});
    // Nothing to copy: both compute the same fixed table.
    check_same("vs the built-in, in eval()", output, built_in.forward(source), 1e-4);
    source = output;
    target = hand_built.forward(target);
  }

  heading("002", "LayerNormalization (one scalar gain and bias) -> a Module of its own");
  {
    // ember's nn::LayerNorm is torch.nn.LayerNorm (a gain and bias per feature, biased
    // variance, eps inside the square root), so the tutorial's variant is written out above.
    // With the gain 1 and bias 0 they start from, the two differ only by the factor
    // sqrt(n / (n - 1)) between the biased and unbiased standard deviations.
    LayerNormalization hand_built;
    nn::LayerNorm built_in(d_model, 1e-6);
    check_parameters("hand-built", hand_built, 2);
    const Tensor output = hand_built.forward(source);
    check_shape("output", output, {2, 10, d_model});
    const double n = static_cast<double>(d_model);
    check_same("nn::LayerNorm vs sqrt(n / (n - 1)) * LayerNormalization", built_in.forward(source),
               mul(output, std::sqrt(n / (n - 1))), 1e-4);
  }

  // With these norms the encoder and decoder blocks below are exactly ember's pre-LN layers.
  const MakeNorm tutorial_norm = [] { return std::make_shared<LayerNormalization>(); };
  const MakeNorm torch_norm = [d_model] { return std::make_shared<nn::LayerNorm>(d_model); };
  const nn::TransformerLayerOptions layer_options{
      .d_model = d_model, .num_heads = h, .d_ff = d_ff, .dropout = dropout, .norm_first = true};
  const int64_t attention_count = 4 * (d_model * d_model + d_model);
  const int64_t feed_forward_count = 2 * d_model * d_ff + d_ff + d_model;

  heading("002", "FeedForward -> nn::FeedForward(d_model, d_ff, Activation::ReLU, dropout)");
  {
    // The tutorial drops out the hidden layer, ember the output: the same in eval().
    FeedForward hand_built(d_model, d_ff, dropout);
    nn::FeedForward built_in(d_model, d_ff, nn::Activation::ReLU, dropout);
    check_parameters("hand-built", hand_built, feed_forward_count);
    built_in.load_state_dict(renamed(hand_built.state_dict(), kBuiltInNames));
    hand_built.eval();
    built_in.eval();
    const Tensor output = hand_built.forward(source);
    check_shape("output", output, {2, 10, d_model});
    check_same("vs the built-in, in eval()", output, built_in.forward(source));
  }

  heading("002", "MultiHeadAttention -> nn::MultiHeadAttention(d_model, h, dropout)");
  {
    MultiHeadAttention hand_built(d_model, h, dropout);
    nn::MultiHeadAttention built_in(d_model, h, dropout);
    check_parameters("hand-built", hand_built, attention_count);
    built_in.load_state_dict(renamed(hand_built.state_dict(), kBuiltInNames));
    hand_built.eval();
    built_in.eval();
    const Tensor output = hand_built.forward(source, source, source, source_mask);
    check_shape("output", output, {2, 10, d_model});
    const Tensor expected = built_in.forward(source, source, source, {.key_padding_mask = source_padding}).output;
    check_same("vs the built-in with key_padding_mask, in eval()", output, expected);
  }

  heading("002", "ResidualConnection -> the pre-LN residual inside nn::TransformerEncoderLayer");
  {
    // ember has no separate module for it: norm_first = true layers wrap each sublayer this way.
    ResidualConnection residual(dropout, tutorial_norm);
    check_parameters("hand-built", residual, 2);
    nn::Linear sublayer(d_model, d_model);
    check_shape("output", residual.forward(source, [&](const Tensor& x) { return sublayer.forward(x); }),
                {2, 10, d_model});
  }

  heading("002", "EncoderBlock -> nn::TransformerEncoderLayer, norm_first = true");
  {
    EncoderBlock hand_built(std::make_shared<MultiHeadAttention>(d_model, h, dropout),
                            std::make_shared<FeedForward>(d_model, d_ff, dropout), dropout, tutorial_norm);
    check_parameters("hand-built, LayerNormalization", hand_built, attention_count + feed_forward_count + 2 * 2);
    check_shape("output", hand_built.forward(source, source_mask), {2, 10, d_model});

    EncoderBlock with_torch_norm(std::make_shared<MultiHeadAttention>(d_model, h, dropout),
                                 std::make_shared<FeedForward>(d_model, d_ff, dropout), dropout, torch_norm);
    nn::TransformerEncoderLayer built_in(layer_options);
    check_parameters("hand-built with nn::LayerNorm", with_torch_norm,
                     attention_count + feed_forward_count + 2 * 2 * d_model);
    check_parameters("built-in", built_in, attention_count + feed_forward_count + 2 * 2 * d_model);
    built_in.load_state_dict(renamed(with_torch_norm.state_dict(), kBuiltInNames));
    with_torch_norm.eval();
    built_in.eval();
    check_same("with nn::LayerNorm vs the built-in, in eval()", with_torch_norm.forward(source, source_mask),
               built_in.forward(source, {.key_padding_mask = source_padding}));
  }

  heading("002", "DecoderBlock -> nn::TransformerDecoderLayer, norm_first = true");
  {
    auto make_block = [&](const MakeNorm& make_norm) {
      return std::make_shared<DecoderBlock>(std::make_shared<MultiHeadAttention>(d_model, h, dropout),
                                            std::make_shared<MultiHeadAttention>(d_model, h, dropout),
                                            std::make_shared<FeedForward>(d_model, d_ff, dropout), dropout, make_norm);
    };
    const auto hand_built = make_block(tutorial_norm);
    check_parameters("hand-built, LayerNormalization", *hand_built, 2 * attention_count + feed_forward_count + 3 * 2);
    check_shape("output", hand_built->forward(target, source, source_mask, target_mask), {2, 7, d_model});

    const auto with_torch_norm = make_block(torch_norm);
    nn::TransformerDecoderLayer built_in(layer_options);
    check_parameters("built-in", built_in, 2 * attention_count + feed_forward_count + 3 * 2 * d_model);
    built_in.load_state_dict(renamed(with_torch_norm->state_dict(), kBuiltInNames));
    with_torch_norm->eval();
    built_in.eval();
    // The causal target mask is target_is_causal; the source mask is memory_key_padding_mask.
    const Tensor expected = built_in.forward(
        target, source, {.target_is_causal = true, .memory_key_padding_mask = source_padding});
    check_same("with nn::LayerNorm vs the built-in, in eval()",
               with_torch_norm->forward(target, source, source_mask, target_mask), expected);
  }
  // The tutorial's Encoder and Decoder (N blocks, then a final LayerNormalization) are
  // nn::TransformerEncoder(options, N, /*final_norm=*/true) and nn::TransformerDecoder likewise,
  // and the whole model is nn::Transformer.
}

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"From the PyTorch tutorials to ember: each tutorial class built in ember and checked"};
  uint64_t seed = 0;
  app.add_option("--seed", seed, "random seed")->check(examples::at_least(0));

  return examples::run_main(app, argc, argv, [&] {
    manual_seed(seed);
    {
      // Only forward passes below: recording a graph for backward would cost time and memory.
      NoGradGuard no_grad;
      chapter_three();
      attention_is_all_you_need();
      einsum_notebooks();
    }
    if (failed_checks > 0) {
      fmt::print(stderr, "\nerror: {} check(s) failed\n", failed_checks);
      return 1;
    }
    fmt::print("\nevery check passed\n");
    return 0;
  });
}
