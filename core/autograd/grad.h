// Gradients as values: autograd::grad returns the gradients of some outputs with respect to
// some inputs, without touching any .grad, as torch.autograd.grad does. With create_graph the
// returned gradients carry a graph of their own, so they can be differentiated again:
//
//   Tensor y = sum(mul(x, mul(x, x)));                                   // x^3
//   Tensor dy = autograd::grad({y}, {x}, {}, {.create_graph = true})[0];  // 3x^2, differentiable
//   Tensor d2y = autograd::grad({sum(dy)}, {x})[0];                       // 6x
#pragma once

#include <optional>
#include <vector>

#include "core/autograd/backward_options.h"
#include "core/autograd/grad_mode.h"
#include "core/tensor.h"

namespace ember::autograd {

// grad()'s options: the two of every backward pass (BackwardOptions, which Tensor::backward
// takes), meaning the same here, then allow_unused, which only grad() has. They are not inherited
// from BackwardOptions because a designated initializer cannot name a base's fields, and
// {.create_graph = true, .allow_unused = true} should read as PyTorch's keywords do.
struct GradOptions {
  // Keep the saved tensors for another pass through the same graph; by default, when create_graph.
  std::optional<bool> retain_graph = std::nullopt;
  // Record the backward pass, so the gradients returned are differentiable.
  bool create_graph = false;
  // An input the outputs do not depend on gets an undefined gradient instead of an error.
  bool allow_unused = false;

  BackwardOptions backward_options() const { return {.retain_graph = retain_graph, .create_graph = create_graph}; }
};

// The gradients of `outputs` (weighted by `grad_outputs`, one per output, which may be left out
// for one-element outputs) with respect to each of `inputs`, leaves or not. Only the part of
// the graph between them is run; no .grad changes, and no post-accumulate-grad hook runs.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, const GradOptions& options = {});

// Grad mode set to `enabled` for a scope, whatever the caller's, and restored after (PyTorch's
// set_grad_enabled): what differentiates a function turns it on even under NoGradGuard, and a
// backward pass sets it to create_graph.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~GradModeGuard() { GradMode::set_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

namespace detail {
// Whether the backward pass running on this thread is an autograd::grad call (which must leave
// every .grad alone) rather than a backward().
bool in_grad_call();
}  // namespace detail

}  // namespace ember::autograd
