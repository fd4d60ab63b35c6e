// BERT (Devlin et al., 2019) with the parameter names and config.json keys of Hugging Face's
// implementation, so that a downloaded checkpoint folder (config.json + model.safetensors, such
// as bert-base-uncased or prajjwal1/bert-tiny) loads unchanged:
//
//   auto model = nn::BertForMaskedLM::from_pretrained("models/bert-base-uncased");
//   Tensor logits = model->forward(ids, {.attention_mask = mask});   // [batch, T, vocab_size]
//
// The network, post-LN as published:
//   embeddings  word + position + token type, LayerNorm, dropout
//   each layer  h = LayerNorm(h + dropout(dense(attention(h))))          attention.output
//               h = LayerNorm(h + dropout(dense(act(dense(h)))))         intermediate, output
//   pooler      tanh(dense(h[:, 0]))                                     the [CLS] position
//   heads       masked LM: LayerNorm(act(dense(h))) W_word^T + bias (decoder tied to the word
//               embeddings); sequence classification: dense(dropout(pooled)).
// tests/golden/make_bert_golden.py writes the same network in PyTorch; tests/test_bert.cpp checks
// ember's logits, loss and gradients against it to 1e-9 in float64.
// This header holds the modules; it includes the config (bert_config.h) and the checkpoint
// loader (hf_loading.h), so that one include brings all of BERT.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ops/cross_entropy.h"
#include "nn/models/bert/bert_config.h"
#include "nn/models/bert/hf_loading.h"
#include "nn/modules/activation.h"
#include "nn/modules/dropout.h"
#include "nn/modules/embedding.h"
#include "nn/modules/layer_norm.h"
#include "nn/modules/linear.h"
#include "nn/modules/module.h"

namespace ember::nn {

// Inputs besides the token ids [batch, T] (int64): each optional.
struct BertInputs {
  Tensor token_type_ids = Tensor();  // int64 [batch, T], segment A = 0, B = 1; zeros when undefined
  Tensor attention_mask = Tensor();  // [batch, T], 1 (or true) where a real token is, 0 at padding
};

class BertEmbeddings : public Module {
 public:
  explicit BertEmbeddings(const BertConfig& config);
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids);
  std::shared_ptr<Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<LayerNorm> norm;  // "LayerNorm"
  std::shared_ptr<Dropout> dropout;
};

// One post-LN encoder layer, under Hugging Face's names: attention.self.{query,key,value},
// attention.output.{dense,LayerNorm}, intermediate.dense, output.{dense,LayerNorm}.
class BertLayer : public Module {
 public:
  explicit BertLayer(const BertConfig& config);
  // h [batch, T, hidden]; mask: a bool [batch, 1, 1, T] (true = may attend) or undefined. With
  // `weights`, the attention weights [batch, heads, T, T] are stored there (the composed form).
  Tensor forward(const Tensor& h, const Tensor& mask, Tensor* weights = nullptr);

 private:
  BertConfig config_;
  Activation activation_;  // config_.hidden_act, parsed once
  std::shared_ptr<Linear> query_, key_, value_, attention_dense_, intermediate_dense_, output_dense_;
  std::shared_ptr<LayerNorm> attention_norm_, output_norm_;
  std::shared_ptr<Dropout> attention_dropout_, output_dropout_;
};

class BertModel : public Module {
 public:
  explicit BertModel(const BertConfig& config, bool add_pooling_layer = true);
  // ids [batch, T] -> the last layer's states [batch, T, hidden].
  Tensor forward(const Tensor& ids, const BertInputs& inputs = {});
  // Each layer's attention weights [batch, heads, T, T], for heatmaps.
  std::vector<Tensor> attention_weights(const Tensor& ids, const BertInputs& inputs = {});
  // tanh(dense(states[:, 0])): [batch, hidden]. Needs the pooling layer.
  Tensor pool(const Tensor& states);
  const BertConfig& config() const { return config_; }

  std::shared_ptr<BertEmbeddings> embeddings;
  std::vector<std::shared_ptr<BertLayer>> layers;  // "encoder.layer.<i>"
  std::shared_ptr<Linear> pooler;                  // "pooler.dense"; null without the pooling layer
  // Activation checkpointing (core/autograd/activation_checkpoint.h), as the transformer stacks
  // have it: in grad mode each layer keeps only its input and is recomputed during backward, for
  // about a third more time per step and a fraction of the activations' memory. The same values
  // and gradients either way.
  bool checkpoint_layers = false;

 private:
  BertConfig config_;
};

// BERT with the masked-language-model head: "bert." + BertModel (no pooler), and
// "cls.predictions.{transform.dense, transform.LayerNorm, bias}"; the decoder's weight is the
// word embeddings' table itself (also listed as cls.predictions.decoder.weight in state_dict).
class BertForMaskedLM : public Module {
 public:
  explicit BertForMaskedLM(const BertConfig& config);
  // ids [batch, T] -> logits [batch, T, vocab_size].
  Tensor forward(const Tensor& ids, const BertInputs& inputs = {});
  // Mean cross-entropy at the positions whose label (int64 [batch, T]) is not kIgnoreIndex, the
  // head evaluated there only. Finds those positions by reading the labels on the host: a
  // training loop passes the ones its batcher found instead (loss_from_states with positions).
  Tensor loss(const Tensor& ids, const Tensor& labels, const BertInputs& inputs = {});
  // The same loss from the encoder's states [batch, T, hidden] (bert->forward's), for a caller
  // that reads the states for a second objective too. `positions`: int64 [n] on the states'
  // device, the chosen positions into the flattened [batch * T], as the batcher found them on the
  // host while it built the batch (datasets::MaskedBatch::positions). Nothing is read back to
  // the host, so the step can be captured as a CUDA graph.
  Tensor loss_from_states(const Tensor& states, const Tensor& labels, const Tensor& positions);
  // The same, the positions found from the labels on the host (as loss() does).
  Tensor loss_from_states(const Tensor& states, const Tensor& labels);
  // The positions of `labels` (int64 [batch, T]) that are not kIgnoreIndex, into the flattened
  // [batch * T], on the labels' device. Reads the labels on the host.
  static Tensor chosen_positions(const Tensor& labels);
  static std::shared_ptr<BertForMaskedLM> from_pretrained(const std::string& folder);
  // The head: states [..., hidden] (bert->forward's) -> logits [..., vocab_size].
  Tensor predictions(const Tensor& states);

  std::shared_ptr<BertModel> bert;

 private:
  BertConfig config_;
  Activation activation_;  // config_.hidden_act, parsed once
  std::shared_ptr<Linear> transform_dense_;
  std::shared_ptr<LayerNorm> transform_norm_;
  Tensor bias_;
};

// BERT with a classification head over the pooled [CLS] state: "bert." + BertModel, "classifier".
class BertForSequenceClassification : public Module {
 public:
  explicit BertForSequenceClassification(const BertConfig& config);
  // ids [batch, T] -> logits [batch, num_labels].
  Tensor forward(const Tensor& ids, const BertInputs& inputs = {});
  // Starts from a pretrained encoder (any BERT checkpoint: a masked-LM one, a base model); the
  // classifier stays freshly initialised unless the checkpoint has one. num_labels overrides
  // the config's.
  static std::shared_ptr<BertForSequenceClassification> from_pretrained(const std::string& folder,
                                                                        std::optional<int64_t> num_labels = {});

  std::shared_ptr<BertModel> bert;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> classifier;
};

}  // namespace ember::nn
