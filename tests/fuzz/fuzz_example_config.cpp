// Fuzzes the reading of the examples' config.json files as text_classifier, translation and
// spelling_to_sound do it: parse, turn a JSON error into ember::Error, and read each size and
// count through examples::config_integer and each rate as a double.
#include <nlohmann/json.hpp>

#include "../../examples/common/config_values.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "config.json");
  fuzzing::expect_success_or_error([&] {
    try {
      const nlohmann::json config = nlohmann::json::parse(fuzzing::as_text(data, size));
      for (const char* key : {"d_model", "heads", "layers", "d_ff", "max_tokens", "vocab_size", "warmup_steps",
                              "batch_tokens", "total_steps", "longest_word"}) {
        if (config.is_object() && config.contains(key)) (void)examples::config_integer(config, key, path);
      }
      for (const char* key : {"dropout", "label_smoothing", "lr", "weight_decay"}) {
        if (config.is_object() && config.contains(key)) (void)config.at(key).get<double>();
      }
      if (config.is_object() && config.contains("model")) {
        for (const char* key : {"d_model", "heads", "d_ff", "encoder_layers"}) {
          (void)examples::config_integer(config.at("model"), key, path);
        }
      }
      if (config.is_object() && config.contains("training")) {
        (void)examples::config_integer(config.at("training"), "total_steps", path);
      }
    } catch (const nlohmann::json::exception& error) {
      fail("{}: not a config file: {}", path, error.what());  // what every example's reader does
    }
  });
  return 0;
}
