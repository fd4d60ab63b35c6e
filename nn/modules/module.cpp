// Module: registration, traversal, modes, devices and state dicts.
#include "nn/modules/module.h"

#include <functional>
#include <set>

#include "core/autograd/grad_mode.h"
#include "core/ops/copy.h"

namespace ember::nn {

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

void Module::check_new_name(const std::string& name, const char* what) const {
  EMBER_CHECK(!name.empty() && name.find('.') == std::string::npos,
              "{}: {} name '{}' must be non-empty and contain no '.'", type_name_, what, name);
  auto taken = [&](const auto& entries) {
    for (const auto& entry : entries) {
      if (entry.first == name) return true;
    }
    return false;
  };
  EMBER_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_),
              "{}: the name '{}' is already registered", type_name_, name);
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  EMBER_CHECK(tensor.defined(), "{}: parameter '{}' is undefined", type_name_, name);
  if (!tensor.is_leaf()) tensor = tensor.detach();
  if (requires_grad) tensor.requires_grad_(true);
  parameters_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name, "buffer");
  EMBER_CHECK(tensor.defined(), "{}: buffer '{}' is undefined", type_name_, name);
  tensor = tensor.detach();
  buffers_.emplace_back(name, tensor);
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "submodule");
  EMBER_CHECK(module != nullptr, "{}: submodule '{}' is null", type_name_, name);
  children_.emplace_back(name, std::move(module));
}

template <class Visit>
void Module::visit_tensors(const std::string& prefix, bool parameters, bool recurse, Visit&& visit) const {
  for (const auto& [name, tensor] : parameters ? parameters_ : buffers_) visit(prefix + name, tensor);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->visit_tensors(prefix + name + ".", parameters, true, visit);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  visit_tensors("", true, recurse, [&](const std::string& name, const Tensor& t) { out.emplace_back(name, t); });
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  std::set<const TensorImpl*> seen;  // a parameter shared by two modules (tied weights) appears once
  visit_tensors("", true, recurse, [&](const std::string&, const Tensor& t) {
    if (seen.insert(t.impl()).second) out.push_back(t);
  });
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  visit_tensors("", false, recurse, [&](const std::string& name, const Tensor& t) { out.emplace_back(name, t); });
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& entry : children_) out.push_back(entry.second);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<const Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<const Module>>> out;
  // Non-owning pointer for the root: the caller holds it.
  out.emplace_back("", std::shared_ptr<const Module>(std::shared_ptr<const Module>{}, this));
  std::function<void(const std::string&, const Module&)> walk = [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, child] : m.children_) {
      out.emplace_back(prefix + name, child);
      walk(prefix + name + ".", *child);
    }
  };
  walk("", *this);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t total = 0;
  for (const Tensor& p : parameters()) total += p.numel();
  return total;
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& entry : children_) entry.second->train(on);
}

void set_data(const Tensor& t, const Tensor& src) {
  TensorImpl& impl = *t.impl();
  impl.storage = src.impl()->storage;
  impl.offset = src.impl()->offset;
  impl.sizes = src.impl()->sizes;
  impl.strides = src.impl()->strides;
  impl.dtype = src.impl()->dtype;
  impl.grad = Tensor();
}

void Module::apply_to_tensors(const std::function<Tensor(const Tensor&)>& convert) {
  NoGradGuard no_grad;
  std::set<const TensorImpl*> done;
  auto apply = [&](const std::string&, const Tensor& t) {
    if (!done.insert(t.impl()).second) return;
    // The gradient travels with its tensor, so an optimizer step may follow the move.
    const Tensor grad = t.grad().defined() ? convert(t.grad()) : Tensor();
    set_data(t, convert(t));
    t.impl()->grad = grad;
  };
  visit_tensors("", true, true, apply);
  visit_tensors("", false, true, apply);
}

void Module::to(Device device) {
  apply_to_tensors([device](const Tensor& t) { return t.detach().to(device); });
}

void Module::to(DType dtype) {
  // Only floating tensors change dtype: integer buffers (token ids, counters) keep theirs.
  apply_to_tensors([dtype](const Tensor& t) {
    return is_floating_point(t.dtype()) && is_floating_point(dtype) ? t.detach().to(dtype) : t.detach();
  });
}

void Module::zero_grad() {
  for (const Tensor& p : parameters()) p.impl()->grad = Tensor();
}

StateDict Module::state_dict() const {
  StateDict state;
  visit_tensors("", true, true, [&](const std::string& name, const Tensor& t) { state[name] = t; });
  visit_tensors("", false, true, [&](const std::string& name, const Tensor& t) { state[name] = t; });
  return state;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict own = state_dict();
  if (strict) {
    std::vector<std::string> missing, unexpected;
    for (const auto& [name, tensor] : own) {
      if (!state.contains(name)) missing.push_back(name);
    }
    for (const auto& [name, tensor] : state) {
      if (!own.contains(name)) unexpected.push_back(name);
    }
    EMBER_CHECK(missing.empty() && unexpected.empty(),
                "{}.load_state_dict: missing keys [{}], unexpected keys [{}]", type_name_,
                fmt::join(missing, ", "), fmt::join(unexpected, ", "));
  }
  NoGradGuard no_grad;
  for (const auto& [name, target] : own) {
    auto it = state.find(name);
    if (it == state.end()) continue;
    const Tensor& source = it->second;
    EMBER_CHECK(source.defined(), "{}.load_state_dict: '{}' is undefined", type_name_, name);
    EMBER_CHECK(source.sizes() == target.sizes(), "{}.load_state_dict: '{}' has shape {} in the state dict but {} "
                "in the module", type_name_, name, shape_str(source.sizes()), shape_str(target.sizes()));
    Tensor destination = target;
    destination.copy_(source.to(target.dtype()).to(target.device()));
  }
}

}  // namespace ember::nn
