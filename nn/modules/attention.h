// MultiHeadAttention: queries, keys and values projected by q_proj, k_proj and v_proj, split
// into num_heads heads, attended with scaled dot-product attention, merged and projected by
// out_proj. Self-attention passes the same tensor three times; cross-attention passes the
// encoder's output as key and value.
//
//   nn::MultiHeadAttention attention(512, 8);
//   auto [output, weights] = attention.forward(x, x, x, {.key_padding_mask = padding, .need_weights = true});
//
// forward_cached serves incremental decoding: a KVCache keeps the keys and values already
// projected, so each new position projects only itself.
#pragma once

#include <memory>

#include "core/ops/attention.h"
#include "nn/modules/linear.h"

namespace ember::nn {

// [batch, length, num_heads * head_dim] -> [batch, num_heads, length, head_dim], a view.
Tensor split_heads(const Tensor& x, int64_t num_heads);

// The heads' part of multi-head attention, written once for MultiHeadAttention and BERT's layer:
// scaled dot-product attention of q [batch, heads, L, head_dim] to k and v [batch, heads, S,
// head_dim] (split_heads of the projections), the heads merged back into [batch, L, heads *
// head_dim]. With `weights`, the attention weights [batch, heads, L, S] are stored there (the
// composed form, which keeps them in the graph); without, core may run its fused kernels, as
// PyTorch's fast path does when need_weights is false.
Tensor attend_heads(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                    Tensor* weights = nullptr);

// The causal mask of `new_length` queries that follow `past` cached positions: bool [new_length,
// past + new_length], true where query i (at position past + i) may attend to key j, j <= past + i.
// Undefined when new_length is 1: a single new query sees every key, and needs no mask.
Tensor causal_mask_after_cache(int64_t past, int64_t new_length, Device device);

struct MultiHeadAttentionOptions {
  // bool [batch, S]: true marks a padding key that no query may attend to (PyTorch's
  // convention). Undefined for none.
  Tensor key_padding_mask = Tensor();
  // [L, S] or [batch, num_heads, L, S]: bool (true = may attend, as core's AttentionOptions)
  // or floating of the inputs' dtype (added to the scores). Undefined for none.
  Tensor attn_mask = Tensor();
  // Query i attends to keys j <= i. Cannot be combined with attn_mask.
  bool is_causal = false;
  // Also return the attention weights [batch, num_heads, L, S].
  bool need_weights = false;
};

struct MultiHeadAttentionOutput {
  Tensor output;   // [batch, L, d_model]
  Tensor weights;  // [batch, num_heads, L, S] (after dropout), defined when need_weights
};

// Projected keys and values split into heads, [batch, num_heads, S, head_dim], kept between
// decoding steps. Empty (undefined tensors) until the first forward_cached.
struct KVCache {
  Tensor keys, values;

  bool empty() const { return !keys.defined(); }
  int64_t length() const { return keys.defined() ? keys.size(2) : 0; }
  // Row i becomes the old row rows[i] (int64 [new_batch]); beam search calls it with the beam
  // each surviving hypothesis came from.
  void reorder(const Tensor& rows);
  void clear();
};

class MultiHeadAttention : public Module {
 public:
  // q_proj, k_proj and v_proj are initialised as PyTorch initialises its packed in_proj_weight
  // (xavier_uniform_ over the [3 d_model, d_model] stack, so each is uniform on
  // +-sqrt(6 / (4 d_model))), out_proj as a Linear; every bias starts at zero. `dropout` applies
  // to the attention weights in training mode only.
  MultiHeadAttention(int64_t d_model, int64_t num_heads, double dropout = 0.0, bool bias = true);

  // query [batch, L, d_model], key and value [batch, S, d_model]. A query whose keys are all
  // masked attends to nothing: zero before out_proj (its bias alone after), zero gradients.
  MultiHeadAttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const MultiHeadAttentionOptions& options = {});

  // Attention of new query positions [batch, L, d_model] to everything in `cache`.
  // append (self-attention): key_value [batch, L, d_model] holds the same new positions; their
  // keys and values are projected and appended to the cache first, so the queries see the
  // past and themselves. is_causal lets new query i see keys up to past + i (nothing to mask
  // when L = 1); key_padding_mask [batch, S] and attn_mask [L, S] cover all S = past + L keys.
  // Without append (cross-attention): an empty cache is filled from key_value (the memory) once;
  // later calls reuse it and ignore key_value, which may then be undefined.
  // Equal in value to forward() over the whole sequence, at the new positions.
  MultiHeadAttentionOutput forward_cached(const Tensor& query, const Tensor& key_value, KVCache& cache, bool append,
                                          const MultiHeadAttentionOptions& options = {});
  void reset_parameters();

  int64_t d_model() const { return d_model_; }
  int64_t num_heads() const { return num_heads_; }
  int64_t head_dim() const { return d_model_ / num_heads_; }
  double dropout() const { return dropout_; }

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;

 private:
  std::string describe() const;
  // The mask handed to scaled_dot_product_attention: attn_mask, key_padding_mask and the
  // causal mask merged into one tensor broadcastable to [batch, heads, L, S].
  Tensor merged_mask(const MultiHeadAttentionOptions& options, int64_t batch, int64_t target_length,
                     int64_t source_length, const Tensor& query) const;
  // attend_heads of split queries to split keys and values, projected by out_proj.
  MultiHeadAttentionOutput attend(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const MultiHeadAttentionOptions& options, const Tensor& query);

  int64_t d_model_, num_heads_;
  double dropout_;
};

}  // namespace ember::nn
