// Encoder and decoder layers, and their stacks.
#include "nn/models/transformer_layers.h"

#include "core/autograd/activation_checkpoint.h"
#include "core/autograd/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/indexing.h"

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

MultiHeadAttentionOptions self_attention_options(const DecoderMasks& masks) {
  MultiHeadAttentionOptions attention;
  attention.key_padding_mask = masks.target_key_padding_mask;
  attention.attn_mask = masks.target_mask;
  attention.is_causal = masks.target_is_causal && !masks.target_mask.defined();
  return attention;
}

MultiHeadAttentionOptions cross_attention_options(const DecoderMasks& masks) {
  MultiHeadAttentionOptions attention;
  attention.key_padding_mask = masks.memory_key_padding_mask;
  return attention;
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

Tensor TransformerEncoderLayer::attention_weights(const Tensor& x, const EncoderMasks& masks) {
  check_input(x, options_.d_model, "TransformerEncoderLayer", "input");
  MultiHeadAttentionOptions attention;
  attention.key_padding_mask = masks.key_padding_mask;
  attention.attn_mask = masks.attn_mask;
  attention.is_causal = masks.is_causal;
  attention.need_weights = true;
  // The attention sees what forward() gives it: the normalised input in a pre-LN layer.
  const Tensor h = options_.norm_first ? norm1->forward(x) : x;
  return self_attn->forward(h, h, h, attention).weights;
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

Tensor TransformerDecoderLayer::run(const Tensor& x, const Block& self_attention, const Block& cross_attention) {
  if (options_.norm_first) {
    Tensor h = add(x, dropout1->forward(self_attention(norm1->forward(x))));
    h = add(h, dropout2->forward(cross_attention(norm2->forward(h))));
    return add(h, feed_forward->forward(norm3->forward(h)));
  }
  Tensor h = norm1->forward(add(x, dropout1->forward(self_attention(x))));
  h = norm2->forward(add(h, dropout2->forward(cross_attention(h))));
  return norm3->forward(add(h, feed_forward->forward(h)));
}

Tensor TransformerDecoderLayer::forward(const Tensor& x, const Tensor& memory, const DecoderMasks& masks) {
  check_input(x, options_.d_model, "TransformerDecoderLayer", "target");
  check_input(memory, options_.d_model, "TransformerDecoderLayer", "memory");
  EMBER_CHECK(x.size(0) == memory.size(0), "TransformerDecoderLayer: target batch {} and memory batch {} differ",
              x.size(0), memory.size(0));
  const MultiHeadAttentionOptions self_options = self_attention_options(masks);
  const MultiHeadAttentionOptions cross_options = cross_attention_options(masks);
  return run(
      x, [&](const Tensor& h) { return self_attn->forward(h, h, h, self_options).output; },
      [&](const Tensor& h) { return cross_attn->forward(h, memory, memory, cross_options).output; });
}

Tensor TransformerDecoderLayer::forward_step(const Tensor& x, const Tensor& memory, DecoderLayerCache& cache,
                                             const DecoderMasks& masks) {
  check_input(x, options_.d_model, "TransformerDecoderLayer", "target");
  if (cache.cross_attn.empty() || memory.defined()) {
    check_input(memory, options_.d_model, "TransformerDecoderLayer", "memory");
    EMBER_CHECK(x.size(0) == memory.size(0), "TransformerDecoderLayer: target batch {} and memory batch {} differ",
                x.size(0), memory.size(0));
  }
  const MultiHeadAttentionOptions self_options = self_attention_options(masks);
  const MultiHeadAttentionOptions cross_options = cross_attention_options(masks);
  return run(
      x, [&](const Tensor& h) { return self_attn->forward_cached(h, h, cache.self_attn, true, self_options).output; },
      [&](const Tensor& h) {
        return cross_attn->forward_cached(h, memory, cache.cross_attn, false, cross_options).output;
      });
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
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::shared_ptr<TransformerEncoderLayer> layer = layers->at<TransformerEncoderLayer>(i);
    if (checkpoint_layers && GradMode::is_enabled()) {
      h = autograd::checkpoint([layer, masks](const std::vector<Tensor>& in) { return layer->forward(in[0], masks); },
                               {h});
    } else {
      h = layer->forward(h, masks);
    }
  }
  return norm ? norm->forward(h) : h;
}

std::vector<Tensor> TransformerEncoder::attention_weights(const Tensor& x, const EncoderMasks& masks) {
  std::vector<Tensor> weights;
  Tensor h = x;
  for (size_t i = 0; i < layers->size(); ++i) {
    auto& layer = *layers->at<TransformerEncoderLayer>(i);
    weights.push_back(layer.attention_weights(h, masks));
    h = layer.forward(h, masks);
  }
  return weights;
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
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::shared_ptr<TransformerDecoderLayer> layer = layers->at<TransformerDecoderLayer>(i);
    if (checkpoint_layers && GradMode::is_enabled()) {
      h = autograd::checkpoint(
          [layer, masks](const std::vector<Tensor>& in) { return layer->forward(in[0], in[1], masks); }, {h, memory});
    } else {
      h = layer->forward(h, memory, masks);
    }
  }
  return norm ? norm->forward(h) : h;
}

Tensor TransformerDecoder::forward_step(const Tensor& x, const Tensor& memory, DecoderCache& cache,
                                        const DecoderMasks& masks) {
  if (cache.layers.empty()) cache.layers.resize(layers->size());
  EMBER_CHECK(cache.layers.size() == layers->size(), "TransformerDecoder: the cache holds {} layers, the decoder {}",
              cache.layers.size(), layers->size());
  Tensor h = x;
  for (size_t i = 0; i < layers->size(); ++i) {
    h = layers->at<TransformerDecoderLayer>(i)->forward_step(h, memory, cache.layers[i], masks);
  }
  return norm ? norm->forward(h) : h;
}

void DecoderCache::reorder(const Tensor& rows, bool include_cross_attention) {
  for (DecoderLayerCache& layer : layers) {
    layer.self_attn.reorder(rows);
    if (include_cross_attention) layer.cross_attn.reorder(rows);
  }
  if (target_key_padding_mask.defined()) target_key_padding_mask = index_select(target_key_padding_mask, 0, rows);
}

void DecoderCache::clear() {
  layers.clear();
  target_key_padding_mask = Tensor();
}

}  // namespace ember::nn
