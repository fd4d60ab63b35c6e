// BertConfig: the keys of a Hugging Face BERT config.json that shape the network, read with
// checks that name the file and the key, and written back as Hugging Face reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nn/modules/activation.h"

namespace ember::nn {

// The keys of a BERT config.json that shape the network (the rest are ignored).
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  // As Hugging Face names it: "gelu" (exact), "gelu_new" or "gelu_pytorch_tanh" (tanh form),
  // "relu". Kept as written, so that to_json_file writes the name it read; activation() is the
  // nn::Activation it names.
  std::string hidden_act = "gelu";
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  double initializer_range = 0.02;           // the std of the initial weights (when not loaded)
  std::optional<double> classifier_dropout;  // hidden_dropout_prob when absent or null
  int64_t num_labels = 2;                    // the size of id2label, or "num_labels"

  // Reads a config.json; a missing or null key keeps its default. A path that is not a regular
  // file, a key of the wrong type (a size that is not a JSON integer: 12.7, 1e300, 20.0), or an
  // unsupported value (position_embedding_type other than "absolute", an unknown hidden_act) is
  // an Error naming the file and the key.
  static BertConfig from_json_file(const std::string& path);
  // Throws when the sizes do not fit together (hidden_size not divisible by the heads, ...).
  void check() const;
  // Writes the keys above as a config.json that Hugging Face's BertConfig reads too (atomically).
  void to_json_file(const std::string& path) const;
  // The activation hidden_act names; throws for a name it does not know.
  Activation activation() const { return activation_from_name(hidden_act, "hidden_act"); }
};

}  // namespace ember::nn
