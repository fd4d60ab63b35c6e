// Hugging Face BERT checkpoints into ember's modules: the renamings between the file's keys and
// the module's, and what is reported or refused.
#include "nn/models/bert/hf_loading.h"

#include <algorithm>

#include "core/error.h"
#include "nn/io/regular_file.h"
#include "nn/io/safetensors.h"

namespace ember::nn {

namespace {

bool has_prefix(const StateDict& keys, const std::string& prefix) {
  return std::any_of(keys.begin(), keys.end(), [&](const auto& entry) { return entry.first.starts_with(prefix); });
}

// The file's keys under the module's names.
StateDict renamed_for(const StateDict& module_keys, StateDict file) {
  StateDict renamed;
  for (auto& [key, value] : file) {
    std::string name = key;
    // Checkpoints converted from the original TensorFlow release name LayerNorm's parameters so.
    if (name.ends_with(".gamma")) name = name.substr(0, name.size() - 6) + ".weight";
    if (name.ends_with(".beta")) name = name.substr(0, name.size() - 5) + ".bias";
    renamed[name] = value;
  }
  const bool module_prefixed = has_prefix(module_keys, "bert."), file_prefixed = has_prefix(renamed, "bert.");
  if (module_prefixed && !file_prefixed) {  // a base model's file into a model with a head
    StateDict prefixed;
    for (auto& [key, value] : renamed) prefixed["bert." + key] = value;
    renamed = std::move(prefixed);
  } else if (!module_prefixed && file_prefixed) {  // a model with a head's file into a base model
    StateDict stripped;
    for (auto& [key, value] : renamed) stripped[key.starts_with("bert.") ? key.substr(5) : key] = value;
    renamed = std::move(stripped);
  }
  // The tied decoder is saved once, under the embeddings' and the predictions' names.
  const auto tie = [&](const std::string& name, const std::string& source) {
    if (module_keys.contains(name) && !renamed.contains(name) && renamed.contains(source)) renamed[name] = renamed[source];
  };
  tie("cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight");
  tie("cls.predictions.decoder.bias", "cls.predictions.bias");
  return renamed;
}

}  // namespace

BertLoadReport load_bert_weights(Module& model, const std::string& folder,
                                 const std::vector<std::string>& may_be_missing) {
  const std::string path = folder + "/model.safetensors";
  check_regular_file(path, "load_bert_weights");
  const StateDict file = renamed_for(model.state_dict(), load_safetensors(path));
  return load_checkpoint_tensors(model, file, path, "load_bert_weights", may_be_missing);
}

}  // namespace ember::nn
