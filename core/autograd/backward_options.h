// The options of a backward pass, as PyTorch names them: Tensor::backward takes them, and
// autograd::grad (core/autograd/grad.h) takes them with one more of its own.
//
//   loss.backward();                              // gradients into .grad; the graph is freed
//   loss.backward({.create_graph = true});        // a .grad that can be differentiated again
//   y.backward(gradient, {.retain_graph = true});  // y not one element; the graph kept
#pragma once

#include <optional>

namespace ember::autograd {

struct BackwardOptions {
  // Keep the saved tensors for another pass through the same graph; by default, when
  // create_graph (a gradient that will be differentiated usually passes through them again).
  std::optional<bool> retain_graph = std::nullopt;
  // Record the backward pass, so the gradients it produces are differentiable.
  bool create_graph = false;
};

}  // namespace ember::autograd
