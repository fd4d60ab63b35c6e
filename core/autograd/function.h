// The extension API: a user op with forward and backward in one place, shaped like
// torch.autograd.Function.
//
//   struct Softplus {
//     static constexpr const char* name = "softplus";
//     static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
//       ctx.save_for_backward({inputs[0]});
//       return log(add(exp(inputs[0]), 1.0));
//     }
//     static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad_output) {
//       const Tensor& x = ctx.saved_tensors()[0];
//       return {mul(grad_output, sigmoid(x))};
//     }
//   };
//   Tensor y = autograd::apply<Softplus>({x});
//
// forward runs with recording off, so it may use any ops; apply() records one node whose
// backward calls F::backward. backward returns one gradient per input (undefined = none).
#pragma once

#include <any>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/autograd/record.h"

namespace ember::autograd {

class Context {
 public:
  // Tensors backward will need. They are checked against in-place modification on the way out.
  void save_for_backward(const std::vector<Tensor>& tensors) {
    saved_.clear();
    for (const Tensor& t : tensors) saved_.emplace_back(t);
  }
  std::vector<Tensor> saved_tensors() const {
    std::vector<Tensor> tensors;
    for (const SavedTensor& s : saved_) tensors.push_back(s.get());
    return tensors;
  }

  // Any other value backward needs (a dim, a flag, a shape): ctx.set("dim", int64_t{1}).
  template <class T>
  void set(const std::string& key, T value) {
    values_[key] = std::move(value);
  }
  template <class T>
  T get(const std::string& key) const {
    auto it = values_.find(key);
    EMBER_CHECK(it != values_.end(), "autograd::Context: no value saved under '{}'", key);
    const T* value = std::any_cast<T>(&it->second);
    EMBER_CHECK(value != nullptr, "autograd::Context: value '{}' was saved with another type", key);
    return *value;
  }

  // Which inputs need a gradient; backward may skip the others.
  const std::vector<bool>& needs_input_grad() const { return needs_input_grad_; }

 private:
  template <class F>
  friend Tensor apply(const std::vector<Tensor>& inputs);
  std::vector<SavedTensor> saved_;
  std::map<std::string, std::any> values_;
  std::vector<bool> needs_input_grad_;
};

template <class F>
constexpr const char* function_name() {
  if constexpr (requires { F::name; }) {
    return F::name;
  } else {
    return "custom_function";
  }
}

template <class F>
Tensor apply(const std::vector<Tensor>& inputs) {
  auto ctx = std::make_shared<Context>();
  for (const Tensor& t : inputs) ctx->needs_input_grad_.push_back(t.defined() && t.requires_grad());
  Tensor output;
  {
    NoGradGuard no_grad;
    output = F::forward(*ctx, inputs);
  }
  EMBER_CHECK(output.defined(), "{}: forward returned an undefined tensor", function_name<F>());
  // forward may have returned one of its inputs unchanged; the node needs a tensor of its own.
  for (const Tensor& input : inputs) {
    if (input.defined() && input.impl() == output.impl()) output = output.detach();
  }
  return record(function_name<F>(), output, inputs,
                [ctx](const Tensor& grad_output) { return F::backward(*ctx, grad_output); });
}

}  // namespace ember::autograd
