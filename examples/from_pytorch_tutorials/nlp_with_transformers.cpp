// [000, 001] "NLP with Transformers", chapter 3: AttentionHead, MultiHeadAttention, FeedForward,
// TransformerEncoderLayer, Embeddings and TransformerForSequenceClassification, built in ember
// as the chapter builds them, and each compared with the built-in nn module that does the same.
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

}  // namespace

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

}  // namespace ember::from_pytorch_tutorials
