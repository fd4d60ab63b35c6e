// Reading BERT's config.json through the library's checked JSON reader, and writing it back.
#include "nn/models/bert/bert_config.h"

#include <filesystem>
#include <utility>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/error.h"
#include "nn/io/atomic_file.h"
#include "nn/io/json_reader.h"

namespace ember::nn {

BertConfig BertConfig::from_json_file(const std::string& path) {
  std::error_code error;
  EMBER_CHECK(std::filesystem::exists(path, error), "BertConfig: cannot open {} (a checkpoint folder holds config.json "
              "beside model.safetensors)", path);
  const JsonObjectReader config = JsonObjectReader::read_file(path, "BertConfig");
  BertConfig c;
  config.read_integer("vocab_size", c.vocab_size);
  config.read_integer("hidden_size", c.hidden_size);
  config.read_integer("num_hidden_layers", c.num_hidden_layers);
  config.read_integer("num_attention_heads", c.num_attention_heads);
  config.read_integer("intermediate_size", c.intermediate_size);
  if (config.has_value("hidden_act")) c.hidden_act = config.string_at("hidden_act");
  config.read_number("hidden_dropout_prob", c.hidden_dropout_prob);
  config.read_number("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  config.read_integer("max_position_embeddings", c.max_position_embeddings);
  config.read_integer("type_vocab_size", c.type_vocab_size);
  config.read_number("layer_norm_eps", c.layer_norm_eps);
  // null is not "the default" here: Hugging Face then builds the word table without a padding
  // row, where ember's BERT always keeps one (zero, and never trained): refused, not read as 0.
  if (config.has("pad_token_id") && !config.has_value("pad_token_id")) {
    config.fail_at("pad_token_id", "is null; ember's BERT needs the id of its padding token (Hugging Face's "
                                   "default is 0)");
  }
  config.read_integer("pad_token_id", c.pad_token_id);
  config.read_number("initializer_range", c.initializer_range);
  if (config.has_value("classifier_dropout")) c.classifier_dropout = config.number_at("classifier_dropout");
  if (config.has("id2label") && config.at("id2label").is_object()) {
    c.num_labels = static_cast<int64_t>(config.at("id2label").size());
  }
  if (config.has_value("num_labels")) {
    const int64_t num_labels = config.integer_at("num_labels");
    // Hugging Face keeps id2label's count when the two disagree (with a warning): a classifier
    // of the other size would not match the checkpoint's head, so the file is refused.
    if (config.has("id2label") && config.at("id2label").is_object() && num_labels != c.num_labels) {
      config.fail_at("num_labels", fmt::format("is {}, but id2label names {} labels", num_labels, c.num_labels));
    }
    c.num_labels = num_labels;
  }
  if (config.has_value("position_embedding_type")) {
    const std::string position_type = config.string_at("position_embedding_type");
    if (position_type != "absolute") {
      config.fail_at("position_embedding_type", fmt::format("is '{}'; only \"absolute\" is supported", position_type));
    }
  }
  try {
    c.check();
  } catch (const Error& check_error) {
    fail("{} (in {})", check_error.what(), path);
  }
  return c;
}

void BertConfig::to_json_file(const std::string& path) const {
  using nlohmann::json;
  json config = {{"architectures", {"BertForMaskedLM"}},
                 {"model_type", "bert"},
                 {"vocab_size", vocab_size},
                 {"hidden_size", hidden_size},
                 {"num_hidden_layers", num_hidden_layers},
                 {"num_attention_heads", num_attention_heads},
                 {"intermediate_size", intermediate_size},
                 {"hidden_act", hidden_act},
                 {"hidden_dropout_prob", hidden_dropout_prob},
                 {"attention_probs_dropout_prob", attention_probs_dropout_prob},
                 {"max_position_embeddings", max_position_embeddings},
                 {"type_vocab_size", type_vocab_size},
                 {"layer_norm_eps", layer_norm_eps},
                 {"pad_token_id", pad_token_id},
                 {"initializer_range", initializer_range},
                 {"position_embedding_type", "absolute"},
                 {"num_labels", num_labels}};
  config["classifier_dropout"] = classifier_dropout ? json(*classifier_dropout) : json(nullptr);
  write_file_atomically(path, config.dump(2) + "\n");
}

void BertConfig::check() const {
  EMBER_CHECK(vocab_size > 0 && hidden_size > 0 && num_hidden_layers >= 0 && num_attention_heads > 0 &&
                  intermediate_size > 0 && max_position_embeddings > 0 && type_vocab_size > 0 && num_labels > 0,
              "BertConfig: sizes must be positive (vocab_size {}, hidden_size {}, num_hidden_layers {}, "
              "num_attention_heads {}, intermediate_size {}, max_position_embeddings {}, type_vocab_size {}, "
              "num_labels {})", vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
              max_position_embeddings, type_vocab_size, num_labels);
  EMBER_CHECK(hidden_size % num_attention_heads == 0,
              "BertConfig: hidden_size {} is not a multiple of num_attention_heads {}", hidden_size,
              num_attention_heads);
  try {
    (void)activation();
  } catch (const Error& error) {
    fail("BertConfig: {}", error.what());
  }
  EMBER_CHECK(pad_token_id >= 0 && pad_token_id < vocab_size, "BertConfig: pad_token_id {} is not in [0, vocab_size {})",
              pad_token_id, vocab_size);
  const std::pair<const char*, double> probabilities[] = {{"hidden_dropout_prob", hidden_dropout_prob},
                                                          {"attention_probs_dropout_prob", attention_probs_dropout_prob},
                                                          {"classifier_dropout", classifier_dropout.value_or(0.0)}};
  for (const auto& [key, p] : probabilities) {
    EMBER_CHECK(p >= 0 && p < 1, "BertConfig: {} {} is not a probability in [0, 1)", key, p);
  }
  EMBER_CHECK(layer_norm_eps > 0, "BertConfig: layer_norm_eps {} must be positive", layer_norm_eps);
}

}  // namespace ember::nn
