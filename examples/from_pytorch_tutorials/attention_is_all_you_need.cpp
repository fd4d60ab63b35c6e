// [002] "Attention Is All You Need" from scratch: InputEmbeddings, PositionalEncoding,
// LayerNormalization, FeedForward, MultiHeadAttention, ResidualConnection, EncoderBlock and
// DecoderBlock, built in ember as the tutorial builds them, and compared with the built-ins.
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

}  // namespace

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

}  // namespace ember::from_pytorch_tutorials
