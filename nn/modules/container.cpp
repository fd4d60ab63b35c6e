// Sequential and ModuleList: children registered under their index.
#include "nn/modules/container.h"

#include <string>

namespace ember::nn {

namespace detail {
void fail_wrong_module_type(const char* container, size_t index, const Module& held) {
  fail("{}: module {} is a {}, not the type asked for", container, index, held.type_name());
}
}  // namespace detail

Sequential::Sequential() : UnaryModule("Sequential") {}

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
  EMBER_CHECK(module != nullptr, "Sequential: cannot add a null module at index {}", modules_.size());
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (const auto& module : modules_) out = module->forward(out);
  return out;
}

std::shared_ptr<UnaryModule> Sequential::operator[](size_t index) const {
  EMBER_CHECK(index < modules_.size(), "Sequential: index {} is out of range for {} modules", index,
              modules_.size());
  return modules_[index];
}

ModuleList::ModuleList() : Module("ModuleList") {}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  EMBER_CHECK(module != nullptr, "ModuleList: cannot add a null module at index {}", modules_.size());
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> ModuleList::operator[](size_t index) const {
  EMBER_CHECK(index < modules_.size(), "ModuleList: index {} is out of range for {} modules", index,
              modules_.size());
  return modules_[index];
}

}  // namespace ember::nn
