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
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/modules/dropout.h"
#include "nn/modules/embedding.h"
#include "nn/modules/layer_norm.h"
#include "nn/modules/linear.h"
#include "nn/modules/module.h"

namespace ember::nn {

// The keys of a BERT config.json that shape the network (the rest are ignored).
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // "gelu" (exact), "gelu_new" or "gelu_pytorch_tanh" (tanh form), "relu"
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  double initializer_range = 0.02;           // the std of the initial weights (when not loaded)
  std::optional<double> classifier_dropout;  // hidden_dropout_prob when absent or null
  int64_t num_labels = 2;                    // the size of id2label, or "num_labels"

  // Reads a config.json; a missing key keeps its default, a key of the wrong type or an
  // unsupported value (position_embedding_type other than "absolute", an unknown hidden_act)
  // is an Error naming the file and the key.
  static BertConfig from_json_file(const std::string& path);
  // Throws when the sizes do not fit together (hidden_size not divisible by the heads, ...).
  void check() const;
  // Writes the keys above as a config.json that Hugging Face's BertConfig reads too (atomically).
  void to_json_file(const std::string& path) const;
};

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
  // Mean cross-entropy at the positions whose label (int64 [batch, T]) is not -100, the head
  // evaluated there only. Reads the labels on the host.
  Tensor loss(const Tensor& ids, const Tensor& labels, const BertInputs& inputs = {});
  // The same loss from the encoder's states [batch, T, hidden] (bert->forward's), for a caller
  // that reads the states for a second objective too.
  Tensor loss_from_states(const Tensor& states, const Tensor& labels);
  static std::shared_ptr<BertForMaskedLM> from_pretrained(const std::string& folder);
  // The head: states [..., hidden] (bert->forward's) -> logits [..., vocab_size].
  Tensor predictions(const Tensor& states);

  std::shared_ptr<BertModel> bert;

 private:
  BertConfig config_;
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

// What a checkpoint supplied and lacked, after Hugging Face's renamings: old LayerNorm names
// ("gamma", "beta"), the "bert." prefix added or removed between a base model and a model with
// a head, and the tied decoder weight.
struct BertLoadReport {
  std::vector<std::string> missing;     // the module's keys the file lacks (left as initialised)
  std::vector<std::string> unexpected;  // the file's keys the module does not have (ignored)
};

// Loads folder/model.safetensors into `model` (a BertModel or a Bert* with a head). Keys the
// module has and the file lacks are allowed only if they start with one of `may_be_missing` (a
// fresh head); any other missing key, and every shape mismatch, is an Error naming the keys.
// Unexpected keys (another task's head, a pooler the module does not use) are reported, not
// refused, as Hugging Face does.
BertLoadReport load_bert_weights(Module& model, const std::string& folder,
                                 const std::vector<std::string>& may_be_missing = {});

}  // namespace ember::nn
