// Scaled dot-product attention: softmax(q k^T / sqrt(d) + mask) v, with optional dropout on
// the attention weights. One op with a correct backward under masks and dropout.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace ember {

struct AttentionOptions {
  // Bool mask (true = may attend) or float mask (added to the scores), broadcastable to
  // [..., L, S]. Undefined for none.
  Tensor attn_mask = Tensor();
  double dropout_p = 0.0;  // applied to the weights; pass 0 in evaluation
  bool is_causal = false;  // position i attends to positions <= i (cannot combine with attn_mask)
  std::optional<double> scale = std::nullopt;  // defaults to 1/sqrt(head dim)
};

struct AttentionResult {
  Tensor output;   // [..., L, Ev]
  Tensor weights;  // [..., L, S], after dropout; defined when need_weights
};

// q [..., L, E], k [..., S, E], v [..., S, Ev]; leading dims broadcast as in matmul.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});
// The same, also returning the attention weights (for visualisation).
AttentionResult scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v,
                                                          const AttentionOptions& options = {});

}  // namespace ember
