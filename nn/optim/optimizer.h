// Optimizer: the base of SGD, Adam and AdamW. It holds parameter groups (parameters that share
// hyper-parameters), per-parameter state (momentum buffers, moment estimates, step counts),
// and turns both into a state dict of tensors that a checkpoint can save:
//
//   type.Adam                      0-d int64, names the optimizer
//   param_groups.0.params          1-D int64: the indices of the group's parameters
//   param_groups.0.lr              0-d float64, one per hyper-parameter
//   state.3.exp_avg                the state of parameter 3, counted across groups in order
//
//   nn::AdamW optimizer(nn::weight_decay_groups(model, 0.01), {.lr = 3e-4});
//   loss.backward();
//   optimizer.step();
//   optimizer.zero_grad();
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/modules/module.h"

namespace ember::nn {

// Hyper-parameters by name: "lr", "weight_decay" and the optimizer's own ("momentum",
// "beta1"...). Flags are stored as 0 or 1.
using HyperParameters = std::map<std::string, double>;

// Parameters updated with the same hyper-parameters. `options` holds only those that differ
// from the optimizer's defaults; the optimizer fills in the rest.
struct ParamGroup {
  std::vector<Tensor> params;
  HyperParameters options;
};

// Splits a module's parameters into two groups for decoupled or L2 weight decay: group 0
// (decayed, weight_decay as given) holds the matrices, group 1 (weight_decay 0) the biases (a
// name whose last part contains "bias") and every parameter of rank 0 or 1 (LayerNorm's
// weights). Both groups are always present, so their indices are stable; a shared parameter
// appears once.
std::vector<ParamGroup> weight_decay_groups(const Module& module, double weight_decay);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "SGD", "Adam", "AdamW": names the optimizer in error messages and state dicts.
  const std::string& type_name() const { return type_name_; }

  // Updates every parameter that has a gradient, in place and without recording; parameters
  // without a gradient (and their state) are left as they are. A step may be captured in a CUDA
  // graph (core/cuda_graph.h) once every parameter it updates has its state, that is after one
  // uncaptured step: the kernels read the learning rate and the step counts from device memory,
  // so each replay counts its step and uses the learning rate set before it.
  void step();
  // Drops every parameter's gradient (the next backward starts from zero).
  void zero_grad();
  // Moves every per-parameter state tensor to its parameter's device (call after Module::to;
  // state created later starts there anyway). Refused once a step was captured in a CUDA graph,
  // as load_state_dict is: the graph holds the addresses of the state tensors.
  void to_parameter_devices();

  size_t num_groups() const { return groups_.size(); }
  const ParamGroup& group(size_t index) const;
  // The learning rate of a group: what schedules set before each step.
  double lr(size_t group) const { return option(group, "lr"); }
  void set_lr(size_t group, double lr) { set_option(group, "lr", lr); }
  // Any hyper-parameter of a group, by name; set_option checks the name and the value. Once a
  // step has been captured in a CUDA graph only "lr" may change (the graph keeps the others as
  // they were at capture), and nothing may change during a capture.
  double option(size_t group, const std::string& name) const;
  void set_option(size_t group, const std::string& name, double value);

  // The hyper-parameters of every group and a copy of every parameter's state, in the layout
  // above. Later steps do not change it.
  StateDict state_dict() const;
  // Restores hyper-parameters and state saved by an optimizer of the same type over
  // parameters of the same shapes, grouped the same way. State tensors are converted to
  // their parameter's dtype and device. Anything that differs throws, naming it.
  void load_state_dict(const StateDict& state);

 protected:
  // Named state tensors of one parameter ("momentum_buffer", "exp_avg", "step"); empty until
  // its first update.
  using ParamState = std::map<std::string, Tensor>;

  // defaults: every hyper-parameter the optimizer has, with its default value; state_names:
  // the state each parameter may keep. Checks that groups name only those hyper-parameters
  // and that each parameter is a floating point leaf present once.
  Optimizer(std::string type_name, std::vector<ParamGroup> groups, HyperParameters defaults,
            std::vector<std::string> state_names);
  // Checks every group's values with check_option and check_group. Derived constructors call
  // it: the base constructor cannot, as virtual calls there do not reach the derived class.
  void check_hyper_parameters() const;

  // Updates the parameters of group `group_index` that have a gradient; states[i] belongs to
  // group.params[i]. Runs under NoGradGuard.
  virtual void update_group(size_t group_index, const ParamGroup& group, std::span<ParamState> states) = 0;
  // Throws when `value` is invalid for hyper-parameter `name` of group `group`.
  virtual void check_option(size_t group, const std::string& name, double value) const = 0;
  // Throws when a group's hyper-parameters do not fit together (nesterov without momentum).
  virtual void check_group(size_t) const {}

  // The positions in group.params of the parameters that have a gradient, one list per device
  // (in order of first appearance): each list is one fused step, one kernel table lookup.
  static std::vector<std::vector<size_t>> with_grad_by_device(const ParamGroup& group);

  // The group's learning rate as a 0-d float64 tensor on `device`: what the step kernels read.
  // It always holds lr(group): set_option and load_state_dict refill it, with a kernel queued on
  // the device (no host wait), so a replayed step reads the rate set before its replay.
  const Tensor& lr_tensor(size_t group, Device device);
  // Throws when a parameter's first step, which creates its state (`what`), is being captured in
  // a CUDA graph: the capture would record the creation, and every replay would reset the state.
  void check_can_create_state(size_t group, size_t param, const char* what) const;

 private:
  // Refills group g's learning-rate tensors with lr(g).
  void refresh_lr_tensors(size_t group);
  // Throws once a step was captured: `op` would replace state tensors the graph writes.
  void check_state_not_captured(const char* op) const;
  // Throws, naming the parameter, when a step would write through memory its elements share
  // (an expanded view) or read a gradient that partly overlaps the parameter it updates.
  void check_parameters_writable() const;

  std::string type_name_;
  std::vector<ParamGroup> groups_;
  std::vector<std::string> state_names_;  // the keys a ParamState may hold
  std::vector<ParamState> state_;         // one per parameter, counted across groups in order
  std::vector<std::vector<Tensor>> lr_tensors_;  // per group, one per device its parameters are on
  bool captured_ = false;                        // a step of this optimizer was captured in a graph
};

}  // namespace ember::nn
