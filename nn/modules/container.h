// Containers: Sequential (a chain of UnaryModules, each fed the previous one's output) and
// ModuleList (an indexed list of any modules). Children are named "0", "1", ... as in
// PyTorch, so parameters read "layers.0.linear1.weight".
//
//   auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
//                                               std::make_shared<nn::ReLU>(),
//                                               std::make_shared<nn::Linear>(8, 1));
//   Tensor y = mlp->forward(x);
#pragma once

#include <memory>
#include <vector>

#include "nn/modules/unary_module.h"

namespace ember::nn {

class Sequential : public UnaryModule {
 public:
  Sequential();
  template <class... M>
  explicit Sequential(std::shared_ptr<M>... modules) : Sequential() {
    (push_back(std::move(modules)), ...);
  }

  void push_back(std::shared_ptr<UnaryModule> module);
  // Runs the modules in order; an empty Sequential returns its input.
  Tensor forward(const Tensor& x) override;

  size_t size() const { return modules_.size(); }
  std::shared_ptr<UnaryModule> operator[](size_t index) const;
  // The module at `index` as a T; throws when it is not one.
  template <class T>
  std::shared_ptr<T> at(size_t index) const;

  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<UnaryModule>> modules_;
};

class ModuleList : public Module {
 public:
  ModuleList();
  template <class... M>
  explicit ModuleList(std::shared_ptr<M>... modules) : ModuleList() {
    (push_back(std::move(modules)), ...);
  }

  void push_back(std::shared_ptr<Module> module);

  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  std::shared_ptr<Module> operator[](size_t index) const;
  template <class T>
  std::shared_ptr<T> at(size_t index) const;

  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

namespace detail {
// Throws naming the container, the index and the type it holds there.
[[noreturn]] void fail_wrong_module_type(const char* container, size_t index, const Module& held);
}  // namespace detail

template <class T>
std::shared_ptr<T> Sequential::at(size_t index) const {
  std::shared_ptr<T> typed = std::dynamic_pointer_cast<T>((*this)[index]);
  if (!typed) detail::fail_wrong_module_type("Sequential", index, *modules_[index]);
  return typed;
}

template <class T>
std::shared_ptr<T> ModuleList::at(size_t index) const {
  std::shared_ptr<T> typed = std::dynamic_pointer_cast<T>((*this)[index]);
  if (!typed) detail::fail_wrong_module_type("ModuleList", index, *modules_[index]);
  return typed;
}

}  // namespace ember::nn
