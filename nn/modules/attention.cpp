// MultiHeadAttention: projections, mask merging, and the heads' split, scaled dot-product
// attention and merge (attend_heads, which BERT's layer shares).
#include "nn/modules/attention.h"

#include <cmath>
#include <limits>

#include "core/ops/attention.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/indexing.h"
#include "core/ops/join.h"
#include "core/ops/views.h"
#include "nn/modules/init.h"

namespace ember::nn {

Tensor split_heads(const Tensor& x, int64_t num_heads) {
  return x.view({x.size(0), x.size(1), num_heads, x.size(2) / num_heads}).transpose(1, 2);
}

Tensor attend_heads(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                    Tensor* weights) {
  Tensor output;
  if (weights != nullptr) {
    AttentionResult result = scaled_dot_product_attention_with_weights(q, k, v, options);
    output = result.output;
    *weights = result.weights;
  } else {
    output = scaled_dot_product_attention(q, k, v, options);
  }
  // The fused kernels lay the output out as q, [batch, L, heads, head_dim]: no copy here.
  const int64_t batch = output.size(0), heads = output.size(1), length = output.size(2), head_dim = output.size(3);
  return output.transpose(1, 2).reshape({batch, length, heads * head_dim});
}

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t num_heads, double dropout, bool bias)
    : Module("MultiHeadAttention"), d_model_(d_model), num_heads_(num_heads), dropout_(dropout) {
  EMBER_CHECK(d_model > 0 && num_heads > 0, "{}: d_model and num_heads must be positive", describe());
  EMBER_CHECK(d_model % num_heads == 0, "{}: d_model ({}) must be divisible by num_heads ({})", describe(), d_model,
              num_heads);
  EMBER_CHECK(dropout >= 0.0 && dropout < 1.0, "{}: dropout must be in [0, 1), got {}", describe(), dropout);
  q_proj = register_module("q_proj", std::make_shared<Linear>(d_model, d_model, bias));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d_model, d_model, bias));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d_model, d_model, bias));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_model, d_model, bias));
  reset_parameters();
}

std::string MultiHeadAttention::describe() const {
  return fmt::format("MultiHeadAttention(d_model={}, num_heads={})", d_model_, num_heads_);
}

void MultiHeadAttention::reset_parameters() {
  // PyTorch draws the three input projections as one [3 d_model, d_model] xavier-uniform
  // matrix: fan_in + fan_out = 4 d_model. A gain of 1/sqrt(2) on each [d_model, d_model]
  // block (fans summing to 2 d_model) gives the same bound.
  for (const auto& projection : {q_proj, k_proj, v_proj}) {
    init::xavier_uniform_(projection->weight, 1.0 / std::sqrt(2.0));
    if (projection->bias.defined()) init::zeros_(projection->bias);
  }
  out_proj->reset_parameters();
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

Tensor MultiHeadAttention::merged_mask(const MultiHeadAttentionOptions& options, int64_t batch,
                                       int64_t target_length, int64_t source_length, const Tensor& query) const {
  const Tensor& padding = options.key_padding_mask;
  Tensor attn_mask = options.attn_mask;
  if (padding.defined()) {
    EMBER_CHECK(padding.dtype() == kBool, "{}: key_padding_mask must be bool (true = padding), got {}", describe(),
                padding.dtype());
    EMBER_CHECK(padding.sizes() == (Shape{batch, source_length}),
                "{}: expected key_padding_mask [batch, S] = [{}, {}], got {}", describe(), batch, source_length,
                shape_str(padding.sizes()));
  }
  if (attn_mask.defined()) {
    EMBER_CHECK(!options.is_causal, "{}: pass either attn_mask or is_causal, not both", describe());
    EMBER_CHECK(attn_mask.dtype() == kBool || attn_mask.dtype() == query.dtype(),
                "{}: attn_mask must be bool (true = may attend) or {} like the inputs, got {}", describe(),
                query.dtype(), attn_mask.dtype());
    const bool two_dims = attn_mask.sizes() == Shape{target_length, source_length};
    const bool four_dims = attn_mask.sizes() == Shape{batch, num_heads_, target_length, source_length};
    EMBER_CHECK(two_dims || four_dims, "{}: expected attn_mask [L, S] = [{}, {}] or [batch, num_heads, L, S] = "
                "[{}, {}, {}, {}], got {}", describe(), target_length, source_length, batch, num_heads_,
                target_length, source_length, shape_str(attn_mask.sizes()));
  }
  // Without padding, core takes attn_mask and is_causal as they are.
  if (!padding.defined()) return attn_mask;

  if (options.is_causal) {
    // Query i may attend to key j when j <= i (core's convention).
    const TensorOptions positions = TensorOptions(kInt64).device(query.device());
    const Tensor rows = arange(static_cast<double>(target_length), positions).unsqueeze(1);
    const Tensor columns = arange(static_cast<double>(source_length), positions).unsqueeze(0);
    attn_mask = le(columns, rows);
  }
  const Tensor padded_keys = padding.view({batch, 1, 1, source_length});
  if (!attn_mask.defined()) return logical_not(padded_keys);
  if (attn_mask.dtype() == kBool) return logical_and(attn_mask, logical_not(padded_keys));
  const Tensor padding_scores = masked_fill(zeros({batch, 1, 1, source_length}, query.options()), padded_keys,
                                            -std::numeric_limits<double>::infinity());
  return add(attn_mask, padding_scores);
}

MultiHeadAttentionOutput MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                     const MultiHeadAttentionOptions& options) {
  EMBER_CHECK(query.defined() && key.defined() && value.defined(), "{}: query, key or value is undefined",
              describe());
  EMBER_CHECK(query.dim() == 3 && query.size(2) == d_model_, "{}: expected query [batch, L, {}], got {}", describe(),
              d_model_, shape_str(query.sizes()));
  EMBER_CHECK(key.dim() == 3 && key.size(2) == d_model_, "{}: expected key [batch, S, {}], got {}", describe(),
              d_model_, shape_str(key.sizes()));
  EMBER_CHECK(value.sizes() == key.sizes(), "{}: value {} must have the shape of key {}", describe(),
              shape_str(value.sizes()), shape_str(key.sizes()));
  EMBER_CHECK(key.size(0) == query.size(0), "{}: query {} and key {} differ in batch size", describe(),
              shape_str(query.sizes()), shape_str(key.sizes()));
  return attend(split_heads(q_proj->forward(query), num_heads_), split_heads(k_proj->forward(key), num_heads_),
                split_heads(v_proj->forward(value), num_heads_), options, query);
}

MultiHeadAttentionOutput MultiHeadAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v,
                                                    const MultiHeadAttentionOptions& options, const Tensor& query) {
  const int64_t batch = q.size(0), target_length = q.size(2), source_length = k.size(2);
  AttentionOptions attention;
  attention.attn_mask = merged_mask(options, batch, target_length, source_length, query);
  attention.is_causal = options.is_causal && !attention.attn_mask.defined();
  attention.dropout_p = is_training() ? dropout_ : 0.0;
  MultiHeadAttentionOutput out;
  out.output = out_proj->forward(attend_heads(q, k, v, attention, options.need_weights ? &out.weights : nullptr));
  return out;
}

MultiHeadAttentionOutput MultiHeadAttention::forward_cached(const Tensor& query, const Tensor& key_value,
                                                            KVCache& cache, bool append,
                                                            const MultiHeadAttentionOptions& options) {
  EMBER_CHECK(query.defined() && query.dim() == 3 && query.size(2) == d_model_,
              "{}: expected query [batch, L, {}], got {}", describe(), d_model_,
              query.defined() ? shape_str(query.sizes()) : "an undefined tensor");
  const int64_t batch = query.size(0), new_length = query.size(1);
  if (!cache.empty()) {
    EMBER_CHECK(cache.keys.size(0) == batch, "{}: query {} and the cache's keys {} differ in batch size",
                describe(), shape_str(query.sizes()), shape_str(cache.keys.sizes()));
  }
  if (append || cache.empty()) {
    EMBER_CHECK(key_value.defined() && key_value.dim() == 3 && key_value.size(2) == d_model_ &&
                    key_value.size(0) == batch,
                "{}: expected key_value [{}, S, {}] for query {}, got {}", describe(), batch, d_model_,
                shape_str(query.sizes()), key_value.defined() ? shape_str(key_value.sizes()) : "an undefined tensor");
  }
  MultiHeadAttentionOptions merged = options;
  int64_t past = 0;
  if (append) {
    EMBER_CHECK(key_value.size(1) == new_length,
                "{}: appending to the cache needs key_value {} to hold the query's {} new positions", describe(),
                shape_str(key_value.sizes()), new_length);
    past = cache.length();
    const Tensor k = split_heads(k_proj->forward(key_value), num_heads_);
    const Tensor v = split_heads(v_proj->forward(key_value), num_heads_);
    const bool first = cache.empty();
    cache.keys = first ? k.contiguous() : cat({cache.keys, k}, 2);
    cache.values = first ? v.contiguous() : cat({cache.values, v}, 2);
  } else {
    EMBER_CHECK(!options.is_causal, "{}: is_causal applies to self-attention (append = true) only", describe());
    if (cache.empty()) {
      cache.keys = split_heads(k_proj->forward(key_value), num_heads_).contiguous();
      cache.values = split_heads(v_proj->forward(key_value), num_heads_).contiguous();
    }
  }
  if (options.is_causal) {
    EMBER_CHECK(!options.attn_mask.defined(), "{}: pass either attn_mask or is_causal, not both", describe());
    // New query i sits at position past + i: it sees keys j <= past + i. A single new query
    // sees every key, so it needs no mask.
    merged.is_causal = false;
    merged.attn_mask = causal_mask_after_cache(past, new_length, query.device());
  }
  return attend(split_heads(q_proj->forward(query), num_heads_), cache.keys, cache.values, merged, query);
}

Tensor causal_mask_after_cache(int64_t past, int64_t new_length, Device device) {
  if (new_length == 1) return Tensor();
  const TensorOptions positions = TensorOptions(kInt64).device(device);
  const Tensor rows = arange(static_cast<double>(new_length), positions).unsqueeze(1);
  const Tensor columns = arange(static_cast<double>(past + new_length), positions).unsqueeze(0);
  return le(columns, add(rows, static_cast<double>(past)));
}

void KVCache::reorder(const Tensor& rows) {
  if (empty()) return;
  keys = index_select(keys, 0, rows);
  values = index_select(values, 0, rows);
}

void KVCache::clear() {
  keys = Tensor();
  values = Tensor();
}

}  // namespace ember::nn
