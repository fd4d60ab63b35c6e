// The transformer's building blocks: the encoder layer and decoder layer of "Attention Is All
// You Need", in post-LN form (normalise after each residual add, as the paper and BERT) or pre-LN
// form (normalise each sublayer's input, which trains more stably), and stacks of them.
//
// Decoders also run incrementally: forward_step takes only the new target positions and keeps
// the keys and values of the earlier ones in a DecoderCache.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "nn/modules/activation.h"
#include "nn/modules/attention.h"
#include "nn/modules/container.h"
#include "nn/modules/dropout.h"
#include "nn/modules/feed_forward.h"
#include "nn/modules/layer_norm.h"
#include "nn/modules/module.h"

namespace ember::nn {

struct TransformerLayerOptions {
  int64_t d_model = 512;
  int64_t num_heads = 8;
  int64_t d_ff = 2048;
  double dropout = 0.1;
  Activation activation = Activation::ReLU;
  bool norm_first = false;  // pre-LN when true, post-LN otherwise
  double layer_norm_eps = 1e-5;
};

// Masks for an encoder's self-attention, in MultiHeadAttention's conventions.
struct EncoderMasks {
  Tensor key_padding_mask = Tensor();  // bool [batch, S], true = padding
  Tensor attn_mask = Tensor();         // [S, S]: bool (true = may attend) or additive float
  bool is_causal = false;
};

// Masks for a decoder: its causal self-attention over the target, and its attention to the
// encoder's output (the memory).
struct DecoderMasks {
  Tensor target_key_padding_mask = Tensor();  // bool [batch, T], true = padding
  Tensor target_mask = Tensor();              // [T, T], as EncoderMasks::attn_mask
  bool target_is_causal = true;               // the usual decoder: position i sees positions <= i
  Tensor memory_key_padding_mask = Tensor();  // bool [batch, S], true = padding
};

// What one decoder layer keeps between incremental steps: its self-attention's keys and values
// for every target position so far, and its cross-attention's projection of the memory.
struct DecoderLayerCache {
  KVCache self_attn, cross_attn;
};

// Per-layer caches for a decoder stack; empty until the first forward_step sizes it.
struct DecoderCache {
  std::vector<DecoderLayerCache> layers;
  // The target's padding so far, bool [batch, T], for callers that mask padded target tokens
  // (Transformer::decode_step grows it one column per step). Undefined for none.
  Tensor target_key_padding_mask;

  // Target positions cached so far.
  int64_t length() const { return layers.empty() ? 0 : layers.front().self_attn.length(); }
  // Row i becomes the old row rows[i] (int64 [new_batch]) in every self-attention cache and
  // the padding mask. Cross-attention caches are left as they are: valid when rows only move
  // between rows with the same memory, such as the beams of one sequence; with
  // include_cross_attention they are reordered too.
  void reorder(const Tensor& rows, bool include_cross_attention = false);
  void clear();
};

// Self-attention then a feed-forward block, each wrapped in a residual connection and a
// LayerNorm. Submodules: self_attn, feed_forward, norm1, norm2, dropout1.
class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerLayerOptions& options);
  // x [batch, S, d_model] -> [batch, S, d_model]
  Tensor forward(const Tensor& x, const EncoderMasks& masks = {});
  // The attention weights [batch, num_heads, S, S] this layer's self-attention gives input x
  // (row i: how much query token i takes from each key token; each row sums to 1). For
  // looking inside a model: heatmaps, probing.
  Tensor attention_weights(const Tensor& x, const EncoderMasks& masks = {});
  const TransformerLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<FeedForward> feed_forward;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1;  // on the attention output; feed_forward drops its own

 private:
  Tensor self_attention_block(const Tensor& x, const EncoderMasks& masks);
  TransformerLayerOptions options_;
};

// Causal self-attention, attention to the memory, then a feed-forward block, each with a
// residual connection and a LayerNorm. Submodules: self_attn, cross_attn, feed_forward,
// norm1..norm3, dropout1, dropout2.
class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(const TransformerLayerOptions& options);
  // x [batch, T, d_model], memory [batch, S, d_model] -> [batch, T, d_model]
  Tensor forward(const Tensor& x, const Tensor& memory, const DecoderMasks& masks = {});
  // New target positions x [batch, L, d_model] (usually L = 1) after the cache's past ones ->
  // [batch, L, d_model], equal to forward()'s output at those positions over the whole target.
  // masks.target_key_padding_mask covers all past + L positions and target_mask is [L, past + L];
  // memory may be undefined once the cross-attention cache is filled.
  Tensor forward_step(const Tensor& x, const Tensor& memory, DecoderLayerCache& cache, const DecoderMasks& masks = {});
  const TransformerLayerOptions& options() const { return options_; }

  std::shared_ptr<MultiHeadAttention> self_attn, cross_attn;
  std::shared_ptr<FeedForward> feed_forward;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout1, dropout2;

 private:
  using Block = std::function<Tensor(const Tensor&)>;
  // The residual and normalisation structure around the two attention blocks (pre-LN or
  // post-LN), shared by forward and forward_step.
  Tensor run(const Tensor& x, const Block& self_attention, const Block& cross_attention);
  TransformerLayerOptions options_;
};

// num_layers encoder layers ("layers.0", "layers.1", ...) and, when final_norm, a LayerNorm
// ("norm") after the last: pre-LN stacks need it, since their last layer's output is not
// normalised.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerLayerOptions& options, int64_t num_layers, bool final_norm);
  Tensor forward(const Tensor& x, const EncoderMasks& masks = {});
  // Runs x through the stack and returns every layer's attention weights, [batch, num_heads,
  // S, S] each, in layer order.
  std::vector<Tensor> attention_weights(const Tensor& x, const EncoderMasks& masks = {});
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;  // null without final_norm
  // Activation checkpointing (core/autograd/activation_checkpoint.h): in grad mode each layer
  // keeps only its input and is recomputed during backward, for about a third more time per
  // step and a fraction of the activations' memory. The same values and gradients either way.
  bool checkpoint_layers = false;
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerLayerOptions& options, int64_t num_layers, bool final_norm);
  Tensor forward(const Tensor& x, const Tensor& memory, const DecoderMasks& masks = {});
  // New target positions x [batch, L, d_model] through every layer with its cache (and the
  // final norm), as TransformerDecoderLayer::forward_step.
  Tensor forward_step(const Tensor& x, const Tensor& memory, DecoderCache& cache, const DecoderMasks& masks = {});
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;  // null without final_norm
  // As TransformerEncoder's: each layer (its input and the memory kept) recomputed in backward.
  bool checkpoint_layers = false;
};

}  // namespace ember::nn
