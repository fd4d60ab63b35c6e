// A transformer that reads a token sequence and predicts one class for it, as in "NLP with
// Transformers" chapter 3 and Peter Bloem's classifier: token and learned position
// embeddings, an encoder stack, one vector per sequence (the first token's state, or the mean
// over the real tokens), dropout and a linear head.
#pragma once

#include <optional>

#include "nn/modules/dropout.h"
#include "nn/modules/embedding.h"
#include "nn/modules/layer_norm.h"
#include "nn/modules/linear.h"
#include "nn/modules/module.h"
#include "nn/modules/positional.h"
#include "nn/models/transformer_layers.h"

namespace ember::nn {

enum class Pooling {
  Cls,  // the state of the first token ([CLS] in BERT's inputs)
  Mean  // the mean of the states of the non-padding tokens
};

struct TransformerClassifierOptions {
  int64_t vocab_size = 30522;
  int64_t max_len = 512;
  int64_t num_classes = 2;
  int64_t num_layers = 6;
  TransformerLayerOptions layer;
  Pooling pooling = Pooling::Cls;
  bool embedding_norm = true;  // LayerNorm on token + position embeddings, as BERT
  bool final_norm = false;     // LayerNorm after the encoder (pre-LN stacks often want it)
  std::optional<int64_t> padding_idx = 0;
};

// Submodules: token_embedding, position_embedding, embedding_norm (when enabled), dropout,
// encoder, classifier.
class TransformerClassifier : public Module {
 public:
  explicit TransformerClassifier(const TransformerClassifierOptions& options);

  // ids int64 [batch, S]; padding_mask bool [batch, S] (true = padding), optional.
  // Returns logits [batch, num_classes].
  Tensor forward(const Tensor& ids, const Tensor& padding_mask = Tensor());
  // The pooled sequence vectors [batch, d_model] the head reads.
  Tensor features(const Tensor& ids, const Tensor& padding_mask = Tensor());
  // Every encoder layer's attention weights for these ids, [batch, num_heads, S, S] each, in
  // layer order: what an attention heatmap draws.
  std::vector<Tensor> attention_weights(const Tensor& ids, const Tensor& padding_mask = Tensor());

  const TransformerClassifierOptions& options() const { return options_; }

  std::shared_ptr<Embedding> token_embedding;
  std::shared_ptr<LearnedPositionalEmbedding> position_embedding;
  std::shared_ptr<LayerNorm> embedding_norm;  // null when options.embedding_norm is false
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<Linear> classifier;

 private:
  // Token + position embeddings, their LayerNorm, dropout: the encoder's input.
  Tensor embed(const Tensor& ids);
  void check_inputs(const Tensor& ids, const Tensor& padding_mask) const;
  TransformerClassifierOptions options_;
};

}  // namespace ember::nn
