// GPT-2 (Radford et al., 2019) with the parameter names and config.json keys of Hugging Face's
// implementation, so that a downloaded checkpoint folder (config.json + model.safetensors, such
// as `gpt2`) loads unchanged, and a folder ember saves loads there:
//
//   auto model = nn::GPT2LMHeadModel::from_pretrained("models/gpt2");
//   Tensor ids = model->generate(prompt, 40, {.temperature = 0.8, .top_k = 40});
//
// The network, pre-LN:
//   embeddings  h = dropout(wte[ids] + wpe[positions])
//   each block  h = h + dropout(c_proj(causal_attention(c_attn(ln_1(h)))))    attn
//               h = h + dropout(c_proj(gelu_tanh(c_fc(ln_2(h)))))              mlp
//   output      logits = ln_f(h) wte^T                                          lm_head, tied
// The projections are Conv1D (conv1d.h): weights [in, out], as the checkpoints store them.
// tests/golden/make_gpt2_golden.py writes the same network in PyTorch; tests/test_gpt2.cpp checks
// ember's logits, loss and gradients against it to 1e-9 in float64.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/ops/cross_entropy.h"
#include "nn/models/causal_lm.h"
#include "nn/models/gpt2/conv1d.h"
#include "nn/models/gpt2/gpt2_config.h"
#include "nn/models/hf_checkpoint.h"
#include "nn/models/sampling.h"
#include "nn/modules/attention.h"
#include "nn/modules/container.h"
#include "nn/modules/dropout.h"
#include "nn/modules/embedding.h"
#include "nn/modules/layer_norm.h"
#include "nn/modules/module.h"

namespace ember::nn {

// The keys and values of every block for the positions read so far, [batch, n_head, length,
// head_dim] per block: what generation keeps so that each new token costs one position's work.
struct GPT2Cache {
  std::vector<KVCache> layers;  // one per block; empty until the first forward with the cache

  int64_t length() const { return layers.empty() ? 0 : layers.front().length(); }
  void clear() { layers.clear(); }
  // Row i becomes the old row rows[i] (int64 [new_batch]) in every block's cache.
  void reorder(const Tensor& rows);
};

// Causal self-attention: c_attn projects to queries, keys and values at once ([C, 3C]); c_proj
// maps the merged heads back.
class GPT2Attention : public Module {
 public:
  explicit GPT2Attention(const GPT2Config& config);
  // x [batch, T, C] -> [batch, T, C]. With a cache, x holds the T positions that follow the
  // cache's; their keys and values are appended to it first.
  Tensor forward(const Tensor& x, KVCache* cache = nullptr);

  std::shared_ptr<Conv1D> c_attn, c_proj;
  std::shared_ptr<Dropout> resid_dropout;

 private:
  int64_t n_head_;
  double attn_pdrop_;
};

// The feed-forward block: c_fc [C, inner], the activation, c_proj [inner, C], dropout.
class GPT2MLP : public Module {
 public:
  explicit GPT2MLP(const GPT2Config& config);
  Tensor forward(const Tensor& x);

  std::shared_ptr<Conv1D> c_fc, c_proj;
  std::shared_ptr<Dropout> dropout;

 private:
  Activation activation_;
};

class GPT2Block : public Module {
 public:
  explicit GPT2Block(const GPT2Config& config);
  Tensor forward(const Tensor& x, KVCache* cache = nullptr);

  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<GPT2Attention> attn;
  std::shared_ptr<GPT2MLP> mlp;
};

// Embeddings, blocks "h.<i>", and the final LayerNorm "ln_f".
class GPT2Model : public Module {
 public:
  explicit GPT2Model(const GPT2Config& config);
  // ids int64 [batch, T] -> the final LayerNorm's states [batch, T, n_embd]. With a cache, the
  // ids are the T positions after the cache's length; past + T must not exceed n_positions.
  Tensor forward(const Tensor& ids, GPT2Cache* cache = nullptr);
  const GPT2Config& config() const { return config_; }

  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<Dropout> drop;
  std::shared_ptr<ModuleList> h;
  std::shared_ptr<LayerNorm> ln_f;
  // Activation checkpointing (core/autograd/activation_checkpoint.h): in grad mode each block
  // keeps only its input and is recomputed during backward. The same values and gradients.
  bool checkpoint_layers = false;

 private:
  std::string describe() const;
  GPT2Config config_;
};

// GPT-2 with its language-model head: "transformer." + GPT2Model and "lm_head", whose weight is
// the token embedding's table itself when tie_word_embeddings (GPT-2's case).
class GPT2LMHeadModel : public Module {
 public:
  explicit GPT2LMHeadModel(const GPT2Config& config);

  // ids int64 [batch, T] -> logits [batch, T, vocab_size]; position t predicts token t + 1.
  Tensor forward(const Tensor& ids, GPT2Cache* cache = nullptr);
  // The mean cross-entropy of the model reading ids [batch, T] and predicting targets [batch, T]
  // (targets[:, t] is the token after ids[:, t]; kIgnoreIndex, or options.ignore_index, where
  // nothing is to be predicted). The output layer and the loss run together, a chunk of rows at
  // a time (core/ops/linear_cross_entropy.h): the logits over the vocabulary, the step's largest
  // tensor, are never held whole.
  Tensor loss(const Tensor& ids, const Tensor& targets, CrossEntropyOptions options = {});
  // Hugging Face's loss with labels = ids: every position but the last predicts the next id.
  Tensor loss(const Tensor& ids);

  // Extends prompt ids, int64 [batch, T0] or [T0], by max_new_tokens tokens. Runs in eval mode
  // without recording gradients, then restores the module's mode. With use_cache, the prompt is
  // read once and each new token costs one position (a GPT2Cache); without, the whole context
  // is read again for every token. Both give the same tokens. Past n_positions tokens the model
  // reads the latest n_positions. Returns [batch, T0 + max_new_tokens] ([T0 + ...] for a 1-D
  // prompt), the prompt first.
  Tensor generate(const Tensor& prompt, int64_t max_new_tokens, SamplingOptions sampling = {},
                  bool use_cache = true);

  // Reads folder/config.json and folder/model.safetensors (float32, bf16 or f16 weights, either
  // key form: with or without the "transformer." prefix). The old mask buffers (attn.bias,
  // attn.masked_bias) are skipped; other keys the model lacks are reported in `report`, keys it
  // needs and the file lacks are an Error naming them, as is a shape that differs (naming the
  // key and both shapes). The model is built in `dtype` before the weights are copied in, so a
  // float64 model reads a float64 file without a detour through float32.
  static std::shared_ptr<GPT2LMHeadModel> from_pretrained(const std::string& folder, DType dtype = kFloat32,
                                                          CheckpointLoadReport* report = nullptr);
  // Writes folder/config.json and folder/model.safetensors as Hugging Face's GPT2LMHeadModel
  // saves them ("transformer." keys, the tied lm_head.weight left out), the weights in `dtype`
  // (kFloat32, kBFloat16 or kFloat16). Creates the folder.
  void save_pretrained(const std::string& folder, DType dtype = kFloat32) const;

  const GPT2Config& config() const { return config_; }

  std::shared_ptr<GPT2Model> transformer;
  std::shared_ptr<LanguageModelHead> lm_head;
  // Rows of the output layer computed at once by loss(); 0 picks a chunk of about 128 MiB.
  int64_t loss_chunk_rows = 0;

 private:
  std::string describe() const;
  GPT2Config config_;
};

}  // namespace ember::nn
