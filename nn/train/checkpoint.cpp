// One safetensors file with up to five sections, told apart by key prefix: "model.", "optimizer.",
// "scheduler.", "grad_scaler." and "training." (the step and the generator's seed and offset).
#include "nn/train/checkpoint.h"

#include <bit>

#include "core/ops/factory.h"
#include "core/random.h"
#include "nn/io/safetensors.h"

namespace ember::nn {
namespace {

constexpr const char* kFormat = "ember-checkpoint-1";

void add_section(StateDict& file, const std::string& prefix, const StateDict& section) {
  for (const auto& [name, tensor] : section) file[prefix + name] = tensor;
}

StateDict take_section(const StateDict& file, const std::string& prefix) {
  StateDict section;
  for (const auto& [name, tensor] : file) {
    if (name.starts_with(prefix)) section[name.substr(prefix.size())] = tensor;
  }
  return section;
}

// A uint64 stored bit for bit in an int64 tensor (safetensors has no unsigned 64-bit dtype
// that ember reads).
Tensor unsigned_scalar(uint64_t value) { return tensor({std::bit_cast<int64_t>(value)}, {}); }

int64_t read_int(const StateDict& section, const std::string& key, const std::string& path) {
  auto it = section.find(key);
  EMBER_CHECK(it != section.end() && it->second.numel() == 1 && it->second.dtype() == kInt64,
              "load_checkpoint: {} has no int64 entry 'training.{}' (is it an ember checkpoint?)", path, key);
  return it->second.item<int64_t>();
}

}  // namespace

void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const Scheduler* scheduler, int64_t step, const GradScaler* scaler) {
  StateDict file;
  add_section(file, "model.", model.state_dict());
  add_section(file, "optimizer.", optimizer.state_dict());
  if (scheduler != nullptr) add_section(file, "scheduler.", scheduler->state_dict());
  if (scaler != nullptr) add_section(file, "grad_scaler.", scaler->state_dict());
  const PhiloxState rng = Generator::global().state();
  file["training.step"] = tensor({step}, {});
  file["training.rng_seed"] = unsigned_scalar(rng.seed);
  file["training.rng_offset"] = unsigned_scalar(rng.offset);
  save_safetensors(path, file, {{"format", kFormat}});
}

int64_t load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer, Scheduler* scheduler,
                        GradScaler* scaler) {
  std::map<std::string, std::string> metadata;
  const StateDict file = load_safetensors(path, &metadata);
  EMBER_CHECK(metadata["format"] == kFormat, "load_checkpoint: {} is not an ember checkpoint (format '{}', expected '{}')",
              path, metadata["format"], kFormat);
  const StateDict training = take_section(file, "training.");
  const int64_t step = read_int(training, "step", path);
  const PhiloxState rng{std::bit_cast<uint64_t>(read_int(training, "rng_seed", path)),
                        std::bit_cast<uint64_t>(read_int(training, "rng_offset", path))};
  const StateDict scheduler_state = take_section(file, "scheduler.");
  EMBER_CHECK((scheduler != nullptr) == !scheduler_state.empty(),
              "load_checkpoint: {} {} a learning-rate schedule, but {} was given", path,
              scheduler_state.empty() ? "has no" : "has", scheduler != nullptr ? "one" : "none");
  // Everything is loaded before anything global changes, and each part names the file on error.
  try {
    model.load_state_dict(take_section(file, "model."));
    optimizer.load_state_dict(take_section(file, "optimizer."));
    if (scheduler != nullptr) scheduler->load_state_dict(scheduler_state);
    const StateDict scaler_state = take_section(file, "grad_scaler.");
    if (scaler != nullptr && scaler->is_enabled() && !scaler_state.empty()) scaler->load_state_dict(scaler_state);
  } catch (const Error& error) {
    fail("load_checkpoint: {}: {}", path, error.what());
  }
  Generator::global().set_state(rng);
  return step;
}

}  // namespace ember::nn
