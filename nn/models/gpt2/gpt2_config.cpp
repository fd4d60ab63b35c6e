// Reading GPT-2's config.json through the library's checked JSON reader, and writing it back.
#include "nn/models/gpt2/gpt2_config.h"

#include <fmt/format.h>

#include <utility>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "nn/io/atomic_file.h"
#include "nn/io/json_reader.h"

namespace ember::nn {

GPT2Config GPT2Config::from_json_file(const std::string& path) {
  const JsonObjectReader config = JsonObjectReader::read_file(path, "GPT2Config");
  GPT2Config c;
  config.read_integer("vocab_size", c.vocab_size);
  config.read_integer("n_positions", c.n_positions);
  config.read_integer("n_embd", c.n_embd);
  config.read_integer("n_layer", c.n_layer);
  config.read_integer("n_head", c.n_head);
  if (config.has_value("n_inner")) c.n_inner = config.integer_at("n_inner");
  if (config.has_value("activation_function")) c.activation_function = config.string_at("activation_function");
  config.read_number("resid_pdrop", c.resid_pdrop);
  config.read_number("embd_pdrop", c.embd_pdrop);
  config.read_number("attn_pdrop", c.attn_pdrop);
  config.read_number("layer_norm_epsilon", c.layer_norm_epsilon);
  config.read_number("initializer_range", c.initializer_range);
  if (config.has_value("tie_word_embeddings")) c.tie_word_embeddings = config.boolean_at("tie_word_embeddings");
  config.read_integer("bos_token_id", c.bos_token_id);
  config.read_integer("eos_token_id", c.eos_token_id);
  // Variants of the architecture that Hugging Face's class builds and ember's does not: refused,
  // since loading their weights into plain GPT-2 would compute something else without a word.
  const auto refuse_if = [&](const char* key, bool value_built) {
    if (config.has_value(key) && config.boolean_at(key) != value_built) {
      config.fail_at(key, fmt::format("is {}; ember's GPT-2 is built with {}", !value_built, value_built));
    }
  };
  refuse_if("add_cross_attention", false);
  refuse_if("scale_attn_weights", true);
  refuse_if("scale_attn_by_inverse_layer_idx", false);
  try {
    c.check();
  } catch (const Error& check_error) {
    fail("{} (in {})", check_error.what(), path);
  }
  return c;
}

void GPT2Config::to_json_file(const std::string& path, const std::string& torch_dtype) const {
  using nlohmann::json;
  json config = {{"architectures", {"GPT2LMHeadModel"}},
                 {"model_type", "gpt2"},
                 {"vocab_size", vocab_size},
                 {"n_positions", n_positions},
                 {"n_ctx", n_positions},
                 {"n_embd", n_embd},
                 {"n_layer", n_layer},
                 {"n_head", n_head},
                 {"activation_function", activation_function},
                 {"resid_pdrop", resid_pdrop},
                 {"embd_pdrop", embd_pdrop},
                 {"attn_pdrop", attn_pdrop},
                 {"layer_norm_epsilon", layer_norm_epsilon},
                 {"initializer_range", initializer_range},
                 {"tie_word_embeddings", tie_word_embeddings},
                 {"bos_token_id", bos_token_id},
                 {"eos_token_id", eos_token_id},
                 {"torch_dtype", torch_dtype}};
  config["n_inner"] = n_inner ? json(*n_inner) : json(nullptr);
  write_file_atomically(path, config.dump(2) + "\n");
}

void GPT2Config::check() const {
  EMBER_CHECK(vocab_size > 0 && n_positions > 0 && n_embd > 0 && n_layer >= 0 && n_head > 0 && inner_size() > 0,
              "GPT2Config: sizes must be positive (vocab_size {}, n_positions {}, n_embd {}, n_layer {}, n_head {}, "
              "n_inner {})", vocab_size, n_positions, n_embd, n_layer, n_head, inner_size());
  EMBER_CHECK(n_embd % n_head == 0, "GPT2Config: n_embd {} is not a multiple of n_head {}", n_embd, n_head);
  try {
    (void)activation();
  } catch (const Error& error) {
    fail("GPT2Config: {}", error.what());
  }
  const std::pair<const char*, double> probabilities[] = {
      {"resid_pdrop", resid_pdrop}, {"embd_pdrop", embd_pdrop}, {"attn_pdrop", attn_pdrop}};
  for (const auto& [key, p] : probabilities) {
    EMBER_CHECK(p >= 0 && p < 1, "GPT2Config: {} {} is not a probability in [0, 1)", key, p);
  }
  EMBER_CHECK(layer_norm_epsilon > 0, "GPT2Config: layer_norm_epsilon {} must be positive", layer_norm_epsilon);
  EMBER_CHECK(initializer_range >= 0, "GPT2Config: initializer_range {} must not be negative", initializer_range);
}

}  // namespace ember::nn
