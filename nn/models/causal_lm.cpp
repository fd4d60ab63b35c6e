// The causal language model: its output layer, forward pass, next-token loss and sampling.
#include "nn/models/causal_lm.h"

#include <cmath>
#include <limits>

#include "core/autograd/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/indexing.h"
#include "core/ops/join.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/sort.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"
#include "nn/modules/init.h"

namespace ember::nn {

LanguageModelHead::LanguageModelHead(int64_t d_model, int64_t vocab_size) : UnaryModule("LanguageModelHead") {
  EMBER_CHECK(d_model > 0 && vocab_size > 0, "LanguageModelHead(d_model={}, vocab_size={}): sizes must be positive",
              d_model, vocab_size);
  weight = register_parameter("weight", empty({vocab_size, d_model}));
  init::kaiming_uniform_(weight, std::sqrt(5.0));
}

LanguageModelHead::LanguageModelHead(const Tensor& weight) : UnaryModule("LanguageModelHead") {
  EMBER_CHECK(weight.defined() && weight.dim() == 2 && weight.is_leaf(),
              "LanguageModelHead: the shared weight must be a 2-D leaf [vocab_size, d_model], got {}",
              weight.defined() ? shape_str(weight.sizes()) : "undefined");
  this->weight = register_parameter("weight", weight);
}

std::string LanguageModelHead::describe() const {
  return fmt::format("LanguageModelHead(d_model={}, vocab_size={})", d_model(), vocab_size());
}

Tensor LanguageModelHead::forward(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == d_model(), "{}: expected input [..., {}], got {}",
              describe(), d_model(), x.defined() ? shape_str(x.sizes()) : "undefined");
  return linear(x, weight, Tensor());
}

CausalLanguageModel::CausalLanguageModel(const CausalLanguageModelOptions& options)
    : Module("CausalLanguageModel"), options_(options) {
  EMBER_CHECK(options.vocab_size > 0 && options.max_len > 0,
              "CausalLanguageModel: vocab_size ({}) and max_len ({}) must be positive", options.vocab_size,
              options.max_len);
  const int64_t d_model = options.layer.d_model;
  token_embedding = register_module("token_embedding", std::make_shared<Embedding>(options.vocab_size, d_model));
  position_embedding =
      register_module("position_embedding", std::make_shared<LearnedPositionalEmbedding>(options.max_len, d_model));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.layer.dropout));
  // GPT's blocks are encoder layers (no cross-attention) run under a causal mask.
  decoder = register_module(
      "decoder", std::make_shared<TransformerEncoder>(options.layer, options.num_layers, options.final_norm));
  lm_head = register_module("lm_head", options.tie_embeddings
                                           ? std::make_shared<LanguageModelHead>(token_embedding->weight)
                                           : std::make_shared<LanguageModelHead>(d_model, options.vocab_size));
}

std::string CausalLanguageModel::describe() const {
  return fmt::format("CausalLanguageModel(vocab_size={}, max_len={})", options_.vocab_size, options_.max_len);
}

void CausalLanguageModel::check_ids(const Tensor& ids, const char* what, bool allow_1d) const {
  EMBER_CHECK(ids.defined() && ids.dtype() == kInt64 && (ids.dim() == 2 || (allow_1d && ids.dim() == 1)),
              "{}: expected {} int64 of shape {}, got {} {}", describe(), what,
              allow_1d ? "[batch, length] or [length]" : "[batch, length]",
              ids.defined() ? dtype_name(ids.dtype()) : "undefined", ids.defined() ? shape_str(ids.sizes()) : "");
}

Tensor CausalLanguageModel::features(const Tensor& ids) {
  check_ids(ids, "ids", false);
  EMBER_CHECK(ids.size(1) <= options_.max_len, "{}: a sequence of {} tokens is longer than max_len {}", describe(),
              ids.size(1), options_.max_len);
  Tensor tokens;
  try {
    tokens = token_embedding->forward(ids);
  } catch (const Error& error) {
    // An id outside the vocabulary is found by the lookup; say which model was given it.
    fail("{}: {}", describe(), error.what());
  }
  const Tensor x = dropout->forward(position_embedding->forward(tokens));
  return decoder->forward(x, {.is_causal = true});
}

Tensor CausalLanguageModel::forward(const Tensor& ids) { return lm_head->forward(features(ids)); }

Tensor CausalLanguageModel::loss(const Tensor& ids, CrossEntropyOptions options) {
  check_ids(ids, "ids", false);
  EMBER_CHECK(ids.size(1) >= 2, "{}.loss: needs at least 2 tokens per sequence to predict one, got {}", describe(),
              shape_str(ids.sizes()));
  const Tensor inputs = ids.slice(1, std::nullopt, -1);
  const Tensor targets = ids.slice(1, 1, std::nullopt);
  return nn::cross_entropy(forward(inputs), targets, options);
}

Tensor CausalLanguageModel::generate(const Tensor& prompt, int64_t max_new_tokens, SamplingOptions sampling) {
  check_generation_request(prompt, max_new_tokens, sampling, options_.vocab_size, describe() + ".generate");
  NoGradGuard no_grad;
  const EvalModeScope eval_mode(*this);  // no dropout while sampling; the caller's mode afterwards

  Tensor ids = prompt.dim() == 1 ? prompt.unsqueeze(0) : prompt;
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    // The model has positions for max_len tokens only: it reads the latest of them.
    const Tensor context = ids.size(1) > options_.max_len ? ids.slice(1, -options_.max_len, std::nullopt) : ids;
    // Only the last position predicts the next token: the head need not see the others.
    const Tensor last_logits = lm_head->forward(features(context).select(1, -1));  // [batch, vocab_size]
    ids = cat({ids, sample_next_token(last_logits, sampling).unsqueeze(1)}, 1);
  }
  if (prompt.dim() == 1) ids = ids.squeeze(0);
  return max_new_tokens == 0 ? ids.clone() : ids;  // never the caller's own tensor
}

}  // namespace ember::nn
