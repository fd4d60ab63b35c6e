// Module: the base of every layer and model. A module registers its parameters, buffers and
// submodules by name, so that named_parameters() and state_dict() give stable, PyTorch-style
// dotted names ("encoder.layers.0.self_attn.q_proj.weight") that checkpoints rely on.
//
//   class TwoLayer : public nn::Module {
//    public:
//     TwoLayer() : Module("TwoLayer") {
//       first = register_module("first", std::make_shared<nn::Linear>(4, 8));
//       second = register_module("second", std::make_shared<nn::Linear>(8, 1));
//     }
//     Tensor forward(const Tensor& x) { return second->forward(relu(first->forward(x))); }
//     std::shared_ptr<nn::Linear> first, second;
//   };
//
// Modules are held by std::shared_ptr; there is no holder or pimpl layer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::nn {

// Tensors by dotted name: parameters and buffers. std::map keeps keys sorted, the order
// safetensors files use.
using StateDict = std::map<std::string, Tensor>;

class Module {
 public:
  explicit Module(std::string type_name);
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // "Linear", "MultiHeadAttention": names the module in error messages.
  const std::string& type_name() const { return type_name_; }

  // --- the tree --------------------------------------------------------------------------
  // Parameters, buffers and submodules in registration order; with recurse, those of every
  // descendant too, their names prefixed with the path to them.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  // This module (named "") and every descendant, depth first.
  std::vector<std::pair<std::string, std::shared_ptr<const Module>>> named_modules() const;
  // The number of parameter elements (shared parameters counted once).
  int64_t num_parameters() const;

  // --- modes and devices --------------------------------------------------------------------
  // Training mode (the default) or evaluation mode, for this module and all below it.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves (converts) every parameter and buffer in place, with its gradient: handles held
  // elsewhere, such as a layer's `weight` member or an optimizer's parameter list, see the
  // change. An optimizer's state (moments) is created on the parameter's device at its first
  // step; state made before a move follows through Optimizer::to_parameter_devices.
  void to(Device device);
  void to(DType dtype);
  // Drops every parameter's gradient (the next backward starts from zero).
  void zero_grad();

  // --- state ---------------------------------------------------------------------------------
  // Every parameter and buffer by dotted name. The tensors share data with the module.
  StateDict state_dict() const;
  // Copies values into this module's parameters and buffers (converting dtype and device).
  // strict: a missing or unexpected key throws, naming the keys; a shape mismatch always
  // throws, naming the key and both shapes.
  void load_state_dict(const StateDict& state, bool strict = true);

 protected:
  // Registers a parameter (a leaf that requires grad unless requires_grad is false) and
  // returns the handle to keep as a member.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // Registers a buffer: state that is saved and moved with the module but not trained
  // (positional encodings, running statistics).
  Tensor register_buffer(const std::string& name, Tensor tensor);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* what) const;
  template <class Visit>
  void visit_tensors(const std::string& prefix, bool parameters, bool recurse, Visit&& visit) const;
  void apply_to_tensors(const std::function<Tensor(const Tensor&)>& convert);

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Replaces t's data (storage, geometry, dtype) with src's, keeping t's identity: every handle to
// t sees the new data. What Module::to and load_state_dict use.
void set_data(const Tensor& t, const Tensor& src);

}  // namespace ember::nn
