// Optimizer: parameter groups, hyper-parameters, per-parameter state and its state dict.
#include "nn/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/autograd/grad_mode.h"
#include "core/capture_rollback.h"
#include "core/cuda_graph.h"
#include "core/memory_overlap.h"
#include "core/ops/copy.h"
#include "core/ops/factory.h"
#include "core/ops/reduce.h"
#include "core/ops/unary.h"

namespace ember::nn {

std::vector<ParamGroup> weight_decay_groups(const Module& module, double weight_decay) {
  ParamGroup decay{{}, {{"weight_decay", weight_decay}}};
  ParamGroup no_decay{{}, {{"weight_decay", 0.0}}};
  std::set<const TensorImpl*> seen;
  for (const auto& [name, parameter] : module.named_parameters()) {
    if (!seen.insert(parameter.impl()).second) continue;
    const std::string last = name.substr(name.rfind('.') + 1);  // npos + 1 == 0: the whole name
    const bool is_bias = last.find("bias") != std::string::npos;
    (is_bias || parameter.dim() <= 1 ? no_decay : decay).params.push_back(parameter);
  }
  return {decay, no_decay};
}

Optimizer::Optimizer(std::string type_name, std::vector<ParamGroup> groups, HyperParameters defaults,
                     std::vector<std::string> state_names)
    : type_name_(std::move(type_name)), groups_(std::move(groups)), state_names_(std::move(state_names)) {
  EMBER_CHECK(!groups_.empty(), "{}: no parameter groups given", type_name_);
  std::set<const TensorImpl*> seen;
  size_t count = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    for (const auto& [name, value] : group.options) {
      EMBER_CHECK(defaults.contains(name), "{}: parameter group {} sets '{}', which is not a hyper-parameter of {}",
                  type_name_, g, name, type_name_);
    }
    for (const auto& [name, value] : defaults) group.options.try_emplace(name, value);
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      EMBER_CHECK(p.defined(), "{}: parameter {} of group {} is undefined", type_name_, i, g);
      EMBER_CHECK(is_floating_point(p.dtype()), "{}: parameter {} of group {} has dtype {}; only floating point "
                  "parameters can be optimized", type_name_, i, g, p.dtype());
      EMBER_CHECK(p.is_leaf(), "{}: parameter {} of group {} (shape {}) is not a leaf tensor: it was computed by "
                  "an op, so updating it would not change what it was computed from", type_name_, i, g,
                  shape_str(p.sizes()));
      EMBER_CHECK(seen.insert(p.impl()).second, "{}: parameter {} of group {} (shape {}) appears more than once",
                  type_name_, i, g, shape_str(p.sizes()));
    }
    count += group.params.size();
  }
  EMBER_CHECK(count > 0, "{}: got no parameters to optimize", type_name_);
  state_.resize(count);
  lr_tensors_.resize(groups_.size());
}

void Optimizer::check_hyper_parameters() const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const auto& [name, value] : groups_[g].options) check_option(g, name, value);
    check_group(g);
  }
}

const ParamGroup& Optimizer::group(size_t index) const {
  EMBER_CHECK(index < groups_.size(), "{}: group index {} is out of range ({} groups)", type_name_, index,
              groups_.size());
  return groups_[index];
}

double Optimizer::option(size_t group_index, const std::string& name) const {
  const ParamGroup& g = group(group_index);
  auto it = g.options.find(name);
  EMBER_CHECK(it != g.options.end(), "{}: '{}' is not a hyper-parameter of {}", type_name_, name, type_name_);
  return it->second;
}

void Optimizer::set_option(size_t group_index, const std::string& name, double value) {
  (void)option(group_index, name);  // checks the group index and the name
  EMBER_CHECK(!cuda::is_capturing_graph(), "{}: '{}' cannot change while a CUDA graph is captured; set it outside "
              "the captured step, before replay()", type_name_, name);
  EMBER_CHECK(name == "lr" || !captured_ || groups_[group_index].options.at(name) == value,
              "{}: '{}' cannot change after a step of this optimizer was captured in a CUDA graph: the graph keeps "
              "the value it was captured with (only 'lr' is read at each replay)", type_name_, name);
  check_option(group_index, name, value);
  double& slot = groups_[group_index].options[name];
  const double previous = slot;
  slot = value;
  try {
    check_group(group_index);
  } catch (...) {
    slot = previous;
    throw;
  }
  if (name == "lr") refresh_lr_tensors(group_index);
}

const Tensor& Optimizer::lr_tensor(size_t group_index, Device device) {
  for (const Tensor& lr : lr_tensors_[group_index]) {
    if (lr.device() == device) return lr;
  }
  EMBER_CHECK(!cuda::is_capturing_graph(), "{}: the first step on {} must run before a CUDA graph capture (it makes "
              "the learning rate's device copy)", type_name_, device.str());
  return lr_tensors_[group_index].emplace_back(
      scalar_tensor(groups_[group_index].options.at("lr"), TensorOptions(kFloat64).device(device)));
}

void Optimizer::refresh_lr_tensors(size_t group_index) {
  NoGradGuard no_grad;
  for (Tensor& lr : lr_tensors_[group_index]) lr.fill_(groups_[group_index].options.at("lr"));
}

void Optimizer::check_can_create_state(size_t group_index, size_t param, const char* what) const {
  EMBER_CHECK(!cuda::is_capturing_graph(),
              "{}.step: parameter {} of group {} has no {} yet, and a step captured in a CUDA graph cannot create "
              "them (each replay would start them again); run one step uncaptured before the capture",
              type_name_, param, group_index, what);
}

void Optimizer::check_parameters_writable() const {
  const std::string op = type_name_ + ".step";
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& param = groups_[g].params[i];
      if (!param.grad().defined()) continue;
      check_no_internal_overlap(param, op);
      // The fused kernels read the gradient where they write the parameter: it may be the
      // parameter itself, but no other view of its memory (a copy would not be read in a replay).
      const MemoryOverlap overlap = memory_overlap(param, param.grad());
      if (overlap == MemoryOverlap::kNone || overlap == MemoryOverlap::kSame) continue;
      fail("{}: {}: the gradient of parameter {} of group {} (shape {}, strides {}) is a view of the parameter's own "
           "memory (shape {}, strides {}); give it a gradient of its own (clone())",
           op,
           overlap == MemoryOverlap::kPartial
               ? "some elements of the input tensor and the written-to tensor refer to a single memory location"
               : "the gradient may share elements with the parameter it updates",
           i, g, shape_str(param.grad().sizes()), shape_str(param.grad().strides()), shape_str(param.sizes()),
           shape_str(param.strides()));
    }
  }
}

void Optimizer::step() {
  check_parameters_writable();
  if (cuda::is_capturing_graph() && !captured_) {
    captured_ = true;
    cuda::on_capture_failure([this] { captured_ = false; });  // no graph holds this optimizer then
  }
  NoGradGuard no_grad;
  size_t first = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    update_group(g, groups_[g], std::span<ParamState>(state_).subspan(first, groups_[g].params.size()));
    first += groups_[g].params.size();
  }
}

std::vector<std::vector<size_t>> Optimizer::with_grad_by_device(const ParamGroup& group) {
  std::vector<Device> devices;
  std::vector<std::vector<size_t>> lists;
  for (size_t i = 0; i < group.params.size(); ++i) {
    if (!group.params[i].grad().defined()) continue;
    const Device device = group.params[i].device();
    const size_t at = std::find(devices.begin(), devices.end(), device) - devices.begin();
    if (at == devices.size()) {
      devices.push_back(device);
      lists.emplace_back();
    }
    lists[at].push_back(i);
  }
  return lists;
}

void Optimizer::check_state_not_captured(const char* op) const {
  EMBER_CHECK(!captured_, "{}.{}: a step of this optimizer was captured in a CUDA graph, which keeps the addresses of "
              "its state tensors; replacing them would leave the graph updating tensors the optimizer no longer "
              "uses. Do it before the capture, or build a new optimizer (and graph)", type_name_, op);
}

void Optimizer::to_parameter_devices() {
  check_state_not_captured("to_parameter_devices");
  NoGradGuard no_grad;
  size_t index = 0;
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params) {
      for (auto& [name, value] : state_[index]) value = value.to(p.device());
      ++index;
    }
  }
}

void Optimizer::zero_grad() {
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params) p.impl()->grad = Tensor();
  }
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  out["type." + type_name_] = scalar_tensor(1.0, kInt64);
  NoGradGuard no_grad;
  int64_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = fmt::format("param_groups.{}.", g);
    std::vector<int64_t> indices;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) indices.push_back(index++);
    out[prefix + "params"] = tensor(indices, Shape{static_cast<int64_t>(indices.size())});
    for (const auto& [name, value] : groups_[g].options) out[prefix + name] = scalar_tensor(value, kFloat64);
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    for (const auto& [name, value] : state_[i]) out[fmt::format("state.{}.{}", i, name)] = value.clone();
  }
  return out;
}

namespace {

// "param_groups.0.lr" -> {"param_groups", "0", "lr"}; names hold no dots after the second.
std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (int part = 0; part < 2; ++part) {
    const size_t dot = key.find('.', start);
    if (dot == std::string::npos) break;
    parts.push_back(key.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(key.substr(start));
  return parts;
}

std::vector<std::string> hyper_parameter_names(const ParamGroup& group) {
  std::vector<std::string> names;
  for (const auto& entry : group.options) names.push_back(entry.first);
  return names;
}

// The index in "state.<index>.<name>"; -1 when it is not a non-negative integer.
int64_t parse_index(const std::string& text) {
  if (text.empty() || text.size() > 9) return -1;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

// Throws, naming the key, when a loaded state tensor holds values no step could have written:
// inf or NaN anywhere (checked after the conversion to the parameter's dtype, which can make
// them), a negative second moment (its square root divides each update).
void check_state_values(const Tensor& value, const std::string& op, const std::string& key, const std::string& name) {
  if (value.numel() == 0) return;
  EMBER_CHECK(all(isfinite(value)).item<bool>(), "{}: '{}' must be finite, but holds inf or NaN", op, key);
  if (name == "exp_avg_sq") {
    const double smallest = min(value).item<double>();
    EMBER_CHECK(smallest >= 0, "{}: '{}' is a mean of squares but holds a negative value ({})", op, key, smallest);
  }
}

}  // namespace

void Optimizer::load_state_dict(const StateDict& state) {
  const std::string op = type_name_ + ".load_state_dict";
  EMBER_CHECK(!cuda::is_capturing_graph(), "{}: cannot run while a CUDA graph is captured", op);
  check_state_not_captured("load_state_dict");
  // Which optimizer wrote it, first: every other difference follows from a wrong type.
  std::vector<std::string> types;
  for (const auto& [key, value] : state) {
    if (key.starts_with("type.")) types.push_back(key.substr(5));
  }
  EMBER_CHECK(!types.empty(), "{}: the state dict names no optimizer (no 'type.<name>' key)", op);
  EMBER_CHECK(types.size() == 1, "{}: the state dict names several optimizers: {}", op, fmt::join(types, ", "));
  EMBER_CHECK(types[0] == type_name_, "{}: the state dict was saved by {}, not {}", op, types[0], type_name_);

  size_t saved_groups = 0;
  while (state.contains(fmt::format("param_groups.{}.params", saved_groups))) ++saved_groups;
  EMBER_CHECK(saved_groups == groups_.size(), "{}: the state dict has {} parameter groups, this optimizer has {}", op,
              saved_groups, groups_.size());

  // Check everything before changing anything, so a failed load leaves the optimizer as it was.
  std::vector<HyperParameters> new_options(groups_.size());
  std::vector<const Tensor*> params;  // by the index used in "state.<index>"
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = fmt::format("param_groups.{}.", g);
    const Tensor& indices = state.at(prefix + "params");
    EMBER_CHECK(indices.dtype() == kInt64 && indices.dim() == 1, "{}: '{}params' must be a 1-D int64 tensor, got {} "
                "of shape {}", op, prefix, indices.dtype(), shape_str(indices.sizes()));
    EMBER_CHECK(static_cast<size_t>(indices.numel()) == groups_[g].params.size(),
                "{}: parameter group {} has {} parameters in the state dict but {} in this optimizer", op, g,
                indices.numel(), groups_[g].params.size());
    for (const Tensor& p : groups_[g].params) params.push_back(&p);
    for (const auto& [name, current] : groups_[g].options) {
      auto it = state.find(prefix + name);
      EMBER_CHECK(it != state.end(), "{}: the state dict has no '{}{}'", op, prefix, name);
      EMBER_CHECK(it->second.defined() && it->second.numel() == 1, "{}: '{}{}' must hold one value, got shape {}",
                  op, prefix, name, it->second.defined() ? shape_str(it->second.sizes()) : "undefined");
      const double value = it->second.item<double>();
      try {
        check_option(g, name, value);
      } catch (const Error& error) {
        fail("{}: '{}{}': {}", op, prefix, name, error.what());
      }
      new_options[g][name] = value;
    }
  }

  std::vector<ParamState> new_state(state_.size());
  for (const auto& [key, value] : state) {
    if (key.starts_with("type.")) continue;
    const std::vector<std::string> parts = split_key(key);
    if (parts.size() == 3 && parts[0] == "param_groups") {
      const int64_t g = parse_index(parts[1]);
      EMBER_CHECK(g >= 0 && static_cast<size_t>(g) < groups_.size() &&
                      (parts[2] == "params" || groups_[g].options.contains(parts[2])),
                  "{}: unexpected key '{}' ({} has the hyper-parameters {})", op, key, type_name_,
                  fmt::join(hyper_parameter_names(groups_[0]), ", "));
      continue;
    }
    EMBER_CHECK(parts.size() == 3 && parts[0] == "state", "{}: unexpected key '{}'", op, key);
    const int64_t index = parse_index(parts[1]);
    EMBER_CHECK(index >= 0 && static_cast<size_t>(index) < params.size(),
                "{}: '{}' is the state of parameter {}, but this optimizer has {} parameters", op, key, parts[1],
                params.size());
    const std::string& name = parts[2];
    EMBER_CHECK(std::find(state_names_.begin(), state_names_.end(), name) != state_names_.end(),
                "{}: unexpected key '{}': {} keeps no '{}' state (it keeps {})", op, key, type_name_, name,
                fmt::join(state_names_, ", "));
    const Tensor& param = *params[index];
    EMBER_CHECK(value.defined(), "{}: '{}' is undefined", op, key);
    NoGradGuard no_grad;
    if (name == "step") {
      EMBER_CHECK(value.numel() == 1, "{}: '{}' must hold one value, got shape {}", op, key,
                  shape_str(value.sizes()));
      // Bias corrections raise betas to this power: a negative, fractional or NaN count gives
      // NaN or inf in every parameter at the next step.
      const double step = value.item<double>();
      EMBER_CHECK(std::isfinite(step) && step >= 0 && step == std::floor(step),
                  "{}: '{}' must be a step count (a whole number >= 0), got {}", op, key, step);
      new_state[index][name] = scalar_tensor(step, TensorOptions(kFloat64).device(param.device()));
    } else {
      EMBER_CHECK(value.sizes() == param.sizes(), "{}: '{}' has shape {} but parameter {} has shape {}", op, key,
                  shape_str(value.sizes()), index, shape_str(param.sizes()));
      EMBER_CHECK(is_floating_point(value.dtype()), "{}: '{}' must be floating point, got {}", op, key,
                  value.dtype());
      Tensor loaded = value.detach().to(param.dtype()).to(param.device()).clone();
      check_state_values(loaded, op, key, name);
      new_state[index][name] = std::move(loaded);
    }
  }

  std::vector<HyperParameters> old_options;
  for (const ParamGroup& g : groups_) old_options.push_back(g.options);
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].options = new_options[g];
  try {
    for (size_t g = 0; g < groups_.size(); ++g) check_group(g);
  } catch (...) {
    for (size_t g = 0; g < groups_.size(); ++g) groups_[g].options = old_options[g];
    throw;
  }
  state_ = std::move(new_state);
  for (size_t g = 0; g < groups_.size(); ++g) refresh_lr_tensors(g);
}

}  // namespace ember::nn
