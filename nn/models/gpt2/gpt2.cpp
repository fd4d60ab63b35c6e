// GPT-2's blocks, its stack, and the language model on top: forward passes, the loss and
// generation. Loading and saving checkpoints is gpt2_checkpoint.cpp.
#include "nn/models/gpt2/gpt2.h"

#include <cmath>
#include <optional>

#include "core/autograd/activation_checkpoint.h"
#include "core/autograd/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/join.h"
#include "core/ops/linear_cross_entropy.h"
#include "core/ops/indexing.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"
#include "nn/modules/init.h"

namespace ember::nn {

namespace {

std::string shape_of(const Tensor& t) { return t.defined() ? shape_str(t.sizes()) : "an undefined tensor"; }

// The last `length` positions of ids [batch, T] (all of them when T <= length).
Tensor latest(const Tensor& ids, int64_t length) {
  return ids.size(1) > length ? ids.slice(1, -length, std::nullopt) : ids;
}

}  // namespace

void GPT2Cache::reorder(const Tensor& rows) {
  for (KVCache& layer : layers) layer.reorder(rows);
}

// ---- GPT2Attention --------------------------------------------------------------------------

GPT2Attention::GPT2Attention(const GPT2Config& config)
    : Module("GPT2Attention"), n_head_(config.n_head), attn_pdrop_(config.attn_pdrop) {
  c_attn = register_module("c_attn", std::make_shared<Conv1D>(config.n_embd, 3 * config.n_embd,
                                                              config.initializer_range));
  // The projections that write into the residual stream start smaller, by 1/sqrt(2 n_layer) (two
  // per block), so that the stream's variance does not grow with depth (GPT-2's paper, 2.3).
  c_proj = register_module("c_proj", std::make_shared<Conv1D>(config.n_embd, config.n_embd,
                                                              config.initializer_range /
                                                                  std::sqrt(2.0 * static_cast<double>(config.n_layer))));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(config.resid_pdrop));
}

Tensor GPT2Attention::forward(const Tensor& x, KVCache* cache) {
  const int64_t width = c_proj->in_features();
  EMBER_CHECK(x.defined() && x.dim() == 3 && x.size(2) == width, "GPT2Attention: expected x [batch, T, {}], got {}",
              width, shape_of(x));
  const Tensor qkv = c_attn->forward(x);  // [batch, T, 3 C]: queries, keys, values side by side
  const Tensor q = split_heads(qkv.narrow(2, 0, width), n_head_);
  Tensor k = split_heads(qkv.narrow(2, width, width), n_head_);
  Tensor v = split_heads(qkv.narrow(2, 2 * width, width), n_head_);
  AttentionOptions attention;
  attention.dropout_p = is_training() ? attn_pdrop_ : 0.0;
  attention.is_causal = true;
  if (cache != nullptr) {
    const int64_t past = cache->length();
    if (past > 0) {
      EMBER_CHECK(cache->keys.size(0) == x.size(0), "GPT2Attention: x {} and the cache's keys {} differ in batch size",
                  shape_of(x), shape_of(cache->keys));
      k = cat({cache->keys, k}, 2);
      v = cat({cache->values, v}, 2);
      // The new positions follow the cached ones: query i sits at past + i.
      attention.is_causal = false;
      attention.attn_mask = causal_mask_after_cache(past, x.size(1), x.device());
    } else {
      k = contiguous(k);
      v = contiguous(v);
    }
    cache->keys = k;
    cache->values = v;
  }
  return resid_dropout->forward(c_proj->forward(attend_heads(q, k, v, attention)));
}

// ---- GPT2MLP and GPT2Block --------------------------------------------------------------------

GPT2MLP::GPT2MLP(const GPT2Config& config) : Module("GPT2MLP"), activation_(config.activation()) {
  c_fc = register_module("c_fc", std::make_shared<Conv1D>(config.n_embd, config.inner_size(),
                                                          config.initializer_range));
  c_proj = register_module("c_proj", std::make_shared<Conv1D>(config.inner_size(), config.n_embd,
                                                              config.initializer_range /
                                                                  std::sqrt(2.0 * static_cast<double>(config.n_layer))));
  dropout = register_module("dropout", std::make_shared<Dropout>(config.resid_pdrop));
}

Tensor GPT2MLP::forward(const Tensor& x) {
  return dropout->forward(c_proj->forward(activate(activation_, c_fc->forward(x))));
}

GPT2Block::GPT2Block(const GPT2Config& config) : Module("GPT2Block") {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(Shape{config.n_embd}, config.layer_norm_epsilon));
  attn = register_module("attn", std::make_shared<GPT2Attention>(config));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(Shape{config.n_embd}, config.layer_norm_epsilon));
  mlp = register_module("mlp", std::make_shared<GPT2MLP>(config));
}

Tensor GPT2Block::forward(const Tensor& x, KVCache* cache) {
  const Tensor h = add(x, attn->forward(ln_1->forward(x), cache));
  return add(h, mlp->forward(ln_2->forward(h)));
}

// ---- GPT2Model -----------------------------------------------------------------------------------

GPT2Model::GPT2Model(const GPT2Config& config) : Module("GPT2Model"), config_(config) {
  config.check();
  wte = register_module("wte", std::make_shared<Embedding>(config.vocab_size, config.n_embd));
  wpe = register_module("wpe", std::make_shared<Embedding>(config.n_positions, config.n_embd));
  init::normal_(wte->weight, 0.0, config.initializer_range);
  init::normal_(wpe->weight, 0.0, config.initializer_range);
  drop = register_module("drop", std::make_shared<Dropout>(config.embd_pdrop));
  h = register_module("h", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config.n_layer; ++i) h->push_back(std::make_shared<GPT2Block>(config));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(Shape{config.n_embd}, config.layer_norm_epsilon));
}

std::string GPT2Model::describe() const {
  return fmt::format("GPT2Model(n_layer={}, n_head={}, n_embd={}, vocab_size={}, n_positions={})", config_.n_layer,
                     config_.n_head, config_.n_embd, config_.vocab_size, config_.n_positions);
}

Tensor GPT2Model::forward(const Tensor& ids, GPT2Cache* cache) {
  EMBER_CHECK(ids.defined() && ids.dtype() == kInt64 && ids.dim() == 2 && ids.size(1) > 0,
              "{}: expected ids int64 of shape [batch, T] with T >= 1, got {} {}", describe(),
              ids.defined() ? dtype_name(ids.dtype()) : "undefined", shape_of(ids));
  const int64_t past = cache != nullptr ? cache->length() : 0, length = ids.size(1);
  EMBER_CHECK(past + length <= config_.n_positions,
              "{}: {} positions{} do not fit in n_positions {}", describe(), length,
              past > 0 ? fmt::format(" after {} cached ones", past) : std::string(), config_.n_positions);
  Tensor tokens;
  try {
    tokens = wte->forward(ids);
  } catch (const Error& error) {
    // An id outside the vocabulary is found by the lookup; say which model was given it.
    fail("{}: {}", describe(), error.what());
  }
  const Tensor positions = arange(static_cast<double>(past), static_cast<double>(past + length), 1.0,
                                  TensorOptions(kInt64).device(ids.device()));
  Tensor hidden = drop->forward(add(tokens, wpe->forward(positions)));
  if (cache != nullptr && cache->layers.empty()) cache->layers.resize(h->size());
  for (size_t i = 0; i < h->size(); ++i) {
    const std::shared_ptr<GPT2Block> block = h->at<GPT2Block>(i);
    if (cache != nullptr) {
      hidden = block->forward(hidden, &cache->layers[i]);
    } else if (checkpoint_layers && GradMode::is_enabled()) {
      hidden = autograd::checkpoint([block](const std::vector<Tensor>& in) { return block->forward(in[0]); }, {hidden});
    } else {
      hidden = block->forward(hidden);
    }
  }
  return ln_f->forward(hidden);
}

// ---- GPT2LMHeadModel -----------------------------------------------------------------------------

GPT2LMHeadModel::GPT2LMHeadModel(const GPT2Config& config) : Module("GPT2LMHeadModel"), config_(config) {
  transformer = register_module("transformer", std::make_shared<GPT2Model>(config));
  if (config.tie_word_embeddings) {
    lm_head = register_module("lm_head", std::make_shared<LanguageModelHead>(transformer->wte->weight));
  } else {
    lm_head = register_module("lm_head", std::make_shared<LanguageModelHead>(config.n_embd, config.vocab_size));
    init::normal_(lm_head->weight, 0.0, config.initializer_range);
  }
}

std::string GPT2LMHeadModel::describe() const {
  return fmt::format("GPT2LMHeadModel(n_layer={}, n_head={}, n_embd={}, vocab_size={})", config_.n_layer,
                     config_.n_head, config_.n_embd, config_.vocab_size);
}

Tensor GPT2LMHeadModel::forward(const Tensor& ids, GPT2Cache* cache) {
  return lm_head->forward(transformer->forward(ids, cache));
}

Tensor GPT2LMHeadModel::loss(const Tensor& ids, const Tensor& targets, CrossEntropyOptions options) {
  EMBER_CHECK(targets.defined() && targets.dtype() == kInt64 && ids.defined() && targets.sizes() == ids.sizes(),
              "{}.loss: targets must be int64 of the ids' shape {}, got {} {}", describe(), shape_of(ids),
              targets.defined() ? dtype_name(targets.dtype()) : "undefined", shape_of(targets));
  const Tensor states = transformer->forward(ids);
  return linear_cross_entropy(states, lm_head->weight, targets, options, loss_chunk_rows);
}

Tensor GPT2LMHeadModel::loss(const Tensor& ids) {
  EMBER_CHECK(ids.defined() && ids.dim() == 2 && ids.size(1) >= 2,
              "{}.loss: needs ids [batch, T] with T >= 2 to predict one token, got {}", describe(), shape_of(ids));
  // Position t < T - 1 reads ids[:, :t + 1] only, so leaving out the last position changes none of
  // the others' outputs: the same loss as scoring all T positions' logits and dropping the last.
  return loss(ids.slice(1, std::nullopt, -1), ids.slice(1, 1, std::nullopt));
}

Tensor GPT2LMHeadModel::generate(const Tensor& prompt, int64_t max_new_tokens, SamplingOptions sampling,
                                 bool use_cache) {
  check_generation_request(prompt, max_new_tokens, sampling, config_.vocab_size, describe() + ".generate");
  NoGradGuard no_grad;
  const EvalModeScope eval_mode(*this);  // no dropout while sampling; the caller's mode afterwards

  const int64_t window = config_.n_positions;
  Tensor ids = prompt.dim() == 1 ? prompt.unsqueeze(0) : prompt;
  GPT2Cache cache;
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    Tensor states;
    if (!use_cache) {
      states = transformer->forward(latest(ids, window));
    } else if (cache.length() == 0 || cache.length() + 1 > window) {
      // The prompt, or a context that has outgrown the positions: read the latest window afresh,
      // as the uncached loop does.
      cache.clear();
      states = transformer->forward(latest(ids, window), &cache);
    } else {
      states = transformer->forward(ids.slice(1, -1, std::nullopt), &cache);  // the newest token only
    }
    // Only the last position predicts the next token: the head need not see the others.
    const Tensor last_logits = lm_head->forward(states.select(1, -1));
    ids = cat({ids, sample_next_token(last_logits, sampling).unsqueeze(1)}, 1);
  }
  if (prompt.dim() == 1) ids = ids.squeeze(0);
  return max_new_tokens == 0 ? ids.clone() : ids;  // never the caller's own tensor
}

}  // namespace ember::nn
