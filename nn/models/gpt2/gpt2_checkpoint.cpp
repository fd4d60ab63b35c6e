// GPT-2 checkpoints in Hugging Face's layout: config.json + model.safetensors, in both key forms
// found in the wild, and saved as Hugging Face's GPT2LMHeadModel saves them.
#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "core/error.h"
#include "nn/io/regular_file.h"
#include "nn/io/safetensors.h"
#include "nn/models/gpt2/gpt2.h"

namespace ember::nn {

namespace {

constexpr const char* kPrefix = "transformer.";

// The causal mask older checkpoints store in every block: a constant, rebuilt by the attention.
bool is_mask_buffer(const std::string& key) {
  return key.ends_with(".attn.bias") || key.ends_with(".attn.masked_bias");
}

// The file's tensors under GPT2LMHeadModel's names. The `gpt2` checkpoint on the hub was saved
// from the base model (wte.weight, h.0.attn.c_attn.weight, ...); a GPT2LMHeadModel saves them
// under "transformer." and may leave out the tied lm_head.weight.
StateDict renamed_for(StateDict file, bool tied) {
  // A file in the base model's form has no "transformer." key; then every key but the head's
  // gets the prefix. A file in GPT2LMHeadModel's form keeps its keys, so that one the model does
  // not have is reported under the name the file gives it.
  const bool base_form = std::none_of(file.begin(), file.end(),
                                      [](const auto& entry) { return entry.first.starts_with(kPrefix); });
  StateDict renamed;
  for (auto& [key, value] : file) {
    if (is_mask_buffer(key)) continue;
    renamed[base_form && !key.starts_with("lm_head.") ? kPrefix + key : key] = value;
  }
  // The tied output layer is the token table: whatever the file holds under the head's name (a
  // copy of it) is replaced by the table itself, as Hugging Face ties them after loading.
  const std::string table = std::string(kPrefix) + "wte.weight";
  if (tied && renamed.contains(table)) renamed["lm_head.weight"] = renamed[table];
  return renamed;
}

}  // namespace

std::shared_ptr<GPT2LMHeadModel> GPT2LMHeadModel::from_pretrained(const std::string& folder, DType dtype,
                                                                  CheckpointLoadReport* report) {
  const std::string who = "GPT2LMHeadModel.from_pretrained";
  const GPT2Config config = GPT2Config::from_json_file(folder + "/config.json");
  auto model = std::make_shared<GPT2LMHeadModel>(config);
  model->to(dtype);
  const std::string path = folder + "/model.safetensors";
  check_regular_file(path, who);
  const StateDict file = renamed_for(load_safetensors(path), config.tie_word_embeddings);
  CheckpointLoadReport loaded = load_checkpoint_tensors(*model, file, path, who);
  if (report != nullptr) *report = std::move(loaded);
  return model;
}

void GPT2LMHeadModel::save_pretrained(const std::string& folder, DType dtype) const {
  EMBER_CHECK(dtype == kFloat32 || dtype == kBFloat16 || dtype == kFloat16,
              "{}.save_pretrained: weights are saved as float32, bfloat16 or float16, not {}", describe(), dtype);
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  EMBER_CHECK(!error, "{}.save_pretrained: cannot create the folder {}: {}", describe(), folder, error.message());
  StateDict tensors;
  for (const auto& [key, value] : state_dict()) {
    // safetensors holds no shared tensors: the tied head is saved once, as the token table.
    if (config_.tie_word_embeddings && key == "lm_head.weight") continue;
    tensors[key] = value.to(dtype);
  }
  save_safetensors(folder + "/model.safetensors", tensors, {{"format", "pt"}});
  const std::map<DType, std::string> torch_names = {{kFloat32, "float32"}, {kBFloat16, "bfloat16"},
                                                    {kFloat16, "float16"}};
  config_.to_json_file(folder + "/config.json", torch_names.at(dtype));
}

}  // namespace ember::nn
