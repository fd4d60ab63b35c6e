// The transformer classifier.
#include "nn/models/transformer_classifier.h"

#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/views.h"

namespace ember::nn {

TransformerClassifier::TransformerClassifier(const TransformerClassifierOptions& options)
    : Module("TransformerClassifier"), options_(options) {
  EMBER_CHECK(options.num_classes > 0 && options.vocab_size > 0 && options.max_len > 0,
              "TransformerClassifier: vocab_size ({}), max_len ({}) and num_classes ({}) must be positive",
              options.vocab_size, options.max_len, options.num_classes);
  const int64_t d_model = options.layer.d_model;
  token_embedding =
      register_module("token_embedding", std::make_shared<Embedding>(options.vocab_size, d_model, options.padding_idx));
  position_embedding =
      register_module("position_embedding", std::make_shared<LearnedPositionalEmbedding>(options.max_len, d_model));
  if (options.embedding_norm) {
    embedding_norm =
        register_module("embedding_norm", std::make_shared<LayerNorm>(d_model, options.layer.layer_norm_eps));
  }
  dropout = register_module("dropout", std::make_shared<Dropout>(options.layer.dropout));
  encoder = register_module("encoder",
                            std::make_shared<TransformerEncoder>(options.layer, options.num_layers, options.final_norm));
  classifier = register_module("classifier", std::make_shared<Linear>(d_model, options.num_classes));
}

Tensor TransformerClassifier::embed(const Tensor& ids) {
  Tensor x = position_embedding->forward(token_embedding->forward(ids));
  if (embedding_norm) x = embedding_norm->forward(x);
  return dropout->forward(x);
}

void TransformerClassifier::check_inputs(const Tensor& ids, const Tensor& padding_mask) const {
  EMBER_CHECK(ids.defined() && ids.dim() == 2 && ids.dtype() == kInt64,
              "TransformerClassifier: expected int64 ids of shape [batch, length], got {} {}",
              ids.defined() ? dtype_name(ids.dtype()) : "undefined", ids.defined() ? shape_str(ids.sizes()) : "");
  EMBER_CHECK(!padding_mask.defined() || (padding_mask.dtype() == kBool && padding_mask.sizes() == ids.sizes()),
              "TransformerClassifier: padding_mask must be bool of the ids' shape {}, got {} {}",
              shape_str(ids.sizes()), padding_mask.defined() ? dtype_name(padding_mask.dtype()) : "",
              padding_mask.defined() ? shape_str(padding_mask.sizes()) : "");
}

Tensor TransformerClassifier::features(const Tensor& ids, const Tensor& padding_mask) {
  check_inputs(ids, padding_mask);
  const Tensor x = encoder->forward(embed(ids), {.key_padding_mask = padding_mask});
  if (options_.pooling == Pooling::Cls) return x.select(1, 0);
  if (!padding_mask.defined()) return mean(x, {1});
  // Mean over the real tokens only: zero the padded states, divide by the count of real ones.
  const Tensor keep = logical_not(padding_mask).to(x.dtype()).unsqueeze(-1);  // [batch, S, 1]
  return div(sum(mul(x, keep), {1}), clamp(sum(keep, {1}), 1.0, std::nullopt));
}

std::vector<Tensor> TransformerClassifier::attention_weights(const Tensor& ids, const Tensor& padding_mask) {
  check_inputs(ids, padding_mask);
  return encoder->attention_weights(embed(ids), {.key_padding_mask = padding_mask});
}

Tensor TransformerClassifier::forward(const Tensor& ids, const Tensor& padding_mask) {
  return classifier->forward(dropout->forward(features(ids, padding_mask)));
}

}  // namespace ember::nn
