// A decoder-only (GPT-style) causal language model built from the encoder blocks with a causal
// mask, its next-token loss, and sampling (temperature, top-k) to generate text.
#pragma once

#include <memory>

#include "nn/modules/dropout.h"
#include "nn/modules/embedding.h"
#include "nn/modules/losses.h"
#include "nn/modules/module.h"
#include "nn/modules/positional.h"
#include "nn/models/sampling.h"
#include "nn/models/transformer_layers.h"
#include "nn/modules/unary_module.h"

namespace ember::nn {

struct CausalLanguageModelOptions {
  int64_t vocab_size = 50257;
  int64_t max_len = 1024;  // the longest context the model reads
  int64_t num_layers = 12;
  TransformerLayerOptions layer = {.d_model = 768, .num_heads = 12, .d_ff = 3072, .dropout = 0.1,
                                   .activation = Activation::GELU, .norm_first = true};
  bool tie_embeddings = true;  // the output layer reuses the token embedding's table
  bool final_norm = true;      // LayerNorm after the last block (pre-LN stacks need it)
};

// The output layer: logits = x W^T with W [vocab_size, d_model] and no bias, the computation and
// parameter name ("weight") of Linear(d_model, vocab_size, bias=false). Built from a tensor, it
// registers that very tensor, not a copy: a head tied to the token embedding then has one
// parameter under two names, which trains once (parameters() lists it once), moves once with
// Module::to, and appears under both names in state_dict, as in PyTorch.
class LanguageModelHead : public UnaryModule {
 public:
  // A head with its own weight, initialised as Linear's (uniform on +-1/sqrt(d_model)).
  LanguageModelHead(int64_t d_model, int64_t vocab_size);
  // A head whose weight is `weight` itself ([vocab_size, d_model], a leaf).
  explicit LanguageModelHead(const Tensor& weight);

  // x [..., d_model] -> [..., vocab_size].
  Tensor forward(const Tensor& x) override;

  int64_t d_model() const { return weight.size(1); }
  int64_t vocab_size() const { return weight.size(0); }

  Tensor weight;

 private:
  std::string describe() const;
};

// Submodules: token_embedding, position_embedding, dropout, decoder (a TransformerEncoder run
// with a causal mask; its "norm" is the final LayerNorm), lm_head.
class CausalLanguageModel : public Module {
 public:
  explicit CausalLanguageModel(const CausalLanguageModelOptions& options);

  // ids int64 [batch, T] with T <= max_len -> logits [batch, T, vocab_size]; position t's
  // logits depend on ids[:, :t + 1] only and predict ids[:, t + 1].
  Tensor forward(const Tensor& ids);
  // The last block's (normalised) states [batch, T, d_model] that the head reads.
  Tensor features(const Tensor& ids);

  // The mean next-token cross-entropy of ids int64 [batch, T] (T >= 2): the model reads
  // ids[:, :-1] and is scored on ids[:, 1:], so a window may hold max_len + 1 tokens. Targets
  // equal to options.ignore_index (padding) do not count.
  Tensor loss(const Tensor& ids, CrossEntropyOptions options = {});

  // Extends prompt ids, int64 [batch, T0] or [T0] with T0 >= 1, by max_new_tokens tokens,
  // one at a time, each drawn from the model's distribution given the last max_len tokens.
  // Runs in eval mode without recording gradients, then restores the module's mode. Random
  // draws come from ember's generator, so manual_seed makes a sample repeatable. Returns int64
  // [batch, T0 + max_new_tokens] (or [T0 + max_new_tokens] for a 1-D prompt), the prompt first.
  Tensor generate(const Tensor& prompt, int64_t max_new_tokens, SamplingOptions sampling = {});

  const CausalLanguageModelOptions& options() const { return options_; }

  std::shared_ptr<Embedding> token_embedding;
  std::shared_ptr<LearnedPositionalEmbedding> position_embedding;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<TransformerEncoder> decoder;
  std::shared_ptr<LanguageModelHead> lm_head;

 private:
  std::string describe() const;
  void check_ids(const Tensor& ids, const char* what, bool allow_1d) const;

  CausalLanguageModelOptions options_;
};

}  // namespace ember::nn
