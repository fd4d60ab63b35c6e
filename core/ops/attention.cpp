// Scaled dot-product attention composed of ember ops (matmul, masked_fill, softmax, dropout),
// so its backward is theirs, correct under any mask and under dropout:
//   weights = dropout(softmax(q k^T * scale + mask)),  output = weights v
#include "core/ops/attention.h"

#include <cmath>
#include <limits>

#include "core/ops/dropout.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/indexing.h"
#include "core/ops/matmul.h"
#include "core/ops/softmax.h"
#include "core/ops/views.h"

namespace ember {
namespace {

void check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  EMBER_CHECK(q.defined() && k.defined() && v.defined(), "scaled_dot_product_attention: q, k or v is undefined");
  EMBER_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
              "scaled_dot_product_attention: q, k and v need at least 2 dims [..., L, E], got shapes {}, {} and {}",
              shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes()));
  EMBER_CHECK(is_floating_point(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(),
              "scaled_dot_product_attention: q, k and v must share one floating dtype, got {}, {} and {}", q.dtype(),
              k.dtype(), v.dtype());
  EMBER_CHECK(q.size(-1) == k.size(-1),
              "scaled_dot_product_attention: q of shape {} and k of shape {} differ in the embedding dim ({} != {})",
              shape_str(q.sizes()), shape_str(k.sizes()), q.size(-1), k.size(-1));
  EMBER_CHECK(k.size(-2) == v.size(-2),
              "scaled_dot_product_attention: k of shape {} and v of shape {} differ in the source length ({} != {})",
              shape_str(k.sizes()), shape_str(v.sizes()), k.size(-2), v.size(-2));
  EMBER_CHECK(options.dropout_p >= 0.0 && options.dropout_p < 1.0,
              "scaled_dot_product_attention: dropout_p must be in [0, 1), got {}", options.dropout_p);
  const Tensor& mask = options.attn_mask;
  if (!mask.defined()) return;
  EMBER_CHECK(!options.is_causal, "scaled_dot_product_attention: pass either attn_mask or is_causal, not both");
  EMBER_CHECK(mask.dtype() == kBool || mask.dtype() == q.dtype(),
              "scaled_dot_product_attention: attn_mask must be bool or {} like q, got {}", q.dtype(), mask.dtype());
  // Scores are [batch..., L, S], the batch dims of q and k broadcast together.
  Shape scores_shape = broadcast_shapes(Shape(q.sizes().begin(), q.sizes().end() - 2),
                                        Shape(k.sizes().begin(), k.sizes().end() - 2), "scaled_dot_product_attention");
  scores_shape.push_back(q.size(-2));
  scores_shape.push_back(k.size(-2));
  EMBER_CHECK(is_broadcastable_to(mask.sizes(), scores_shape),
              "scaled_dot_product_attention: attn_mask of shape {} does not broadcast to the scores' shape {}",
              shape_str(mask.sizes()), shape_str(scores_shape));
}

}  // namespace

AttentionResult scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v,
                                                          const AttentionOptions& options) {
  check_attention_inputs(q, k, v, options);
  const int64_t target_length = q.size(-2), source_length = k.size(-2);
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  const double minus_infinity = -std::numeric_limits<double>::infinity();

  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), scale);  // [..., L, S]
  if (options.is_causal) {
    // Position i may attend to j <= i: mask the strict upper triangle.
    // Built on q's device: no host-to-device copy per call.
    const TensorOptions positions = TensorOptions(kInt64).device(q.device());
    const Tensor rows = arange(static_cast<double>(target_length), positions).unsqueeze(1);
    const Tensor columns = arange(static_cast<double>(source_length), positions).unsqueeze(0);
    scores = masked_fill(scores, gt(columns, rows), minus_infinity);
  } else if (options.attn_mask.defined()) {
    if (options.attn_mask.dtype() == kBool) {
      scores = masked_fill(scores, logical_not(options.attn_mask), minus_infinity);
    } else {
      scores = add(scores, options.attn_mask);
    }
  }
  Tensor weights = softmax(scores, -1);
  if (options.dropout_p > 0.0) weights = dropout(weights, options.dropout_p, /*train=*/true);
  return AttentionResult{matmul(weights, v), weights};
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  return scaled_dot_product_attention_with_weights(q, k, v, options).output;
}

}  // namespace ember
