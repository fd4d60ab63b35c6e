// Encoder and decoder layers, and their stacks.
#include "nn/transformer_layers.h"

#include "core/ops/elementwise.h"

namespace ember::nn {
namespace {

void check_options(const TransformerLayerOptions& options, const char* module) {
  EMBER_CHECK(options.d_model > 0 && options.num_heads > 0 && options.d_ff > 0,
              "{}: d_model ({}), num_heads ({}) and d_ff ({}) must be positive", module, options.d_model,
              options.num_heads, options.d_ff);
  EMBER_CHECK(options.d_model % options.num_heads == 0, "{}: d_model {} is not divisible by num_heads {}", module,
              options.d_model, options.num_heads);
}

void check_input(const Tensor& x, int64_t d_model, const char* module, const char* what) {
  EMBER_CHECK(x.defined() && x.dim() == 3 && x.size(2) == d_model,
              "{}: expected {} of shape [batch, length, {}], got {}", module, what, d_model,
              x.defined() ? shape_str(x.sizes()) : "an undefined tensor");
}

}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerOptions& options)
    : Module("TransformerEncoderLayer"), options_(options) {
  check_options(options, "TransformerEncoderLayer");
  self_attn = register_module("self_attn",
                              std::make_shared<MultiHeadAttention>(options.d_model, options.num_heads, options.dropout));
  feed_forward = register_module(
      "feed_forward", std::make_shared<FeedForward>(options.d_model, options.d_ff, options.activation, options.dropout));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const EncoderMasks& masks) {
  MultiHeadAttentionOptions attention;
  attention.key_padding_mask = masks.key_padding_mask;
  attention.attn_mask = masks.attn_mask;
  attention.is_causal = masks.is_causal;
  return dropout1->forward(self_attn->forward(x, x, x, attention).output);
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const EncoderMasks& masks) {
  check_input(x, options_.d_model, "TransformerEncoderLayer", "input");
  if (options_.norm_first) {
    const Tensor h = add(x, self_attention_block(norm1->forward(x), masks));
    return add(h, feed_forward->forward(norm2->forward(h)));
  }
  const Tensor h = norm1->forward(add(x, self_attention_block(x, masks)));
  return norm2->forward(add(h, feed_forward->forward(h)));
}

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerOptions& options)
    : Module("TransformerDecoderLayer"), options_(options) {
  check_options(options, "TransformerDecoderLayer");
  self_attn = register_module("self_attn",
                              std::make_shared<MultiHeadAttention>(options.d_model, options.num_heads, options.dropout));
  cross_attn = register_module(
      "cross_attn", std::make_shared<MultiHeadAttention>(options.d_model, options.num_heads, options.dropout));
  feed_forward = register_module(
      "feed_forward", std::make_shared<FeedForward>(options.d_model, options.d_ff, options.activation, options.dropout));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
}

Tensor TransformerDecoderLayer::self_attention_block(const Tensor& x, const DecoderMasks& masks) {
  MultiHeadAttentionOptions attention;
  attention.key_padding_mask = masks.target_key_padding_mask;
  attention.attn_mask = masks.target_mask;
  attention.is_causal = masks.target_is_causal && !masks.target_mask.defined();
  return dropout1->forward(self_attn->forward(x, x, x, attention).output);
}

Tensor TransformerDecoderLayer::cross_attention_block(const Tensor& x, const Tensor& memory,
                                                      const DecoderMasks& masks) {
  MultiHeadAttentionOptions attention;
  attention.key_padding_mask = masks.memory_key_padding_mask;
  return dropout2->forward(cross_attn->forward(x, memory, memory, attention).output);
}

Tensor TransformerDecoderLayer::forward(const Tensor& x, const Tensor& memory, const DecoderMasks& masks) {
  check_input(x, options_.d_model, "TransformerDecoderLayer", "target");
  check_input(memory, options_.d_model, "TransformerDecoderLayer", "memory");
  EMBER_CHECK(x.size(0) == memory.size(0), "TransformerDecoderLayer: target batch {} and memory batch {} differ",
              x.size(0), memory.size(0));
  if (options_.norm_first) {
    Tensor h = add(x, self_attention_block(norm1->forward(x), masks));
    h = add(h, cross_attention_block(norm2->forward(h), memory, masks));
    return add(h, feed_forward->forward(norm3->forward(h)));
  }
  Tensor h = norm1->forward(add(x, self_attention_block(x, masks)));
  h = norm2->forward(add(h, cross_attention_block(h, memory, masks)));
  return norm3->forward(add(h, feed_forward->forward(h)));
}

TransformerEncoder::TransformerEncoder(const TransformerLayerOptions& options, int64_t num_layers, bool final_norm)
    : Module("TransformerEncoder") {
  EMBER_CHECK(num_layers > 0, "TransformerEncoder: num_layers must be positive, got {}", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerEncoderLayer>(options));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
}

Tensor TransformerEncoder::forward(const Tensor& x, const EncoderMasks& masks) {
  Tensor h = x;
  for (size_t i = 0; i < layers->size(); ++i) h = layers->at<TransformerEncoderLayer>(i)->forward(h, masks);
  return norm ? norm->forward(h) : h;
}

TransformerDecoder::TransformerDecoder(const TransformerLayerOptions& options, int64_t num_layers, bool final_norm)
    : Module("TransformerDecoder") {
  EMBER_CHECK(num_layers > 0, "TransformerDecoder: num_layers must be positive, got {}", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerDecoderLayer>(options));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
}

Tensor TransformerDecoder::forward(const Tensor& x, const Tensor& memory, const DecoderMasks& masks) {
  Tensor h = x;
  for (size_t i = 0; i < layers->size(); ++i) h = layers->at<TransformerDecoderLayer>(i)->forward(h, memory, masks);
  return norm ? norm->forward(h) : h;
}

}  // namespace ember::nn
