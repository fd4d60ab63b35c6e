// The part of loading a checkpoint that does not depend on the model: matching keys, reporting
// what is missing or unexpected, and refusing what cannot be loaded.
#include "nn/models/hf_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"

namespace ember::nn {

CheckpointLoadReport load_checkpoint_tensors(Module& model, const StateDict& file, const std::string& path,
                                             const std::string& who, const std::vector<std::string>& may_be_missing) {
  const StateDict module_keys = model.state_dict();
  CheckpointLoadReport report;
  StateDict present;
  std::vector<std::string> refused;
  for (const auto& entry : module_keys) {
    const std::string& key = entry.first;  // not a structured binding: clang cannot capture one under OpenMP
    const auto found = file.find(key);
    if (found != file.end()) {
      present[key] = found->second;
      continue;
    }
    report.missing.push_back(key);
    const bool allowed = std::any_of(may_be_missing.begin(), may_be_missing.end(),
                                     [&](const std::string& prefix) { return key.starts_with(prefix); });
    if (!allowed) refused.push_back(key);
  }
  for (const auto& [key, value] : file) {
    if (!module_keys.contains(key)) report.unexpected.push_back(key);
  }
  EMBER_CHECK(refused.empty(), "{}: {} lacks {} of {}'s parameters: {}", who, path, refused.size(), model.type_name(),
              fmt::join(refused, ", "));
  try {
    model.load_state_dict(present, /*strict=*/false);
  } catch (const Error& error) {
    fail("{}: {}: {}", who, path, error.what());
  }
  return report;
}

}  // namespace ember::nn
