// How an op joins the autograd graph. An op computes its output, then calls record() with the
// closure that computes its inputs' gradients, right beside the forward code:
//
//   Tensor exp(const Tensor& x) {
//     Tensor y = ...forward kernel...;
//     return autograd::record("exp", y, {x}, [y = autograd::save(y)](const Tensor& grad) {
//       return autograd::grads(mul(grad, y.get()));
//     });
//   }
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/tensor.h"

namespace ember::autograd {

// A tensor kept for backward. It holds the data without the graph (so an op may save its own
// output without a reference cycle) and remembers the version it was saved at: get() throws
// when the tensor was modified in place since.
//
// It also remembers where the tensor sat in the graph: its grad_fn, or the leaf itself. When
// get() is called with grad mode on (a backward pass under create_graph) it hands back a tensor
// with that history, so a backward written with tensor ops records a differentiable graph of
// its own. An op's own output is recognised and re-attached to the node running its backward.
// With grad mode off (every first-order backward) get() returns the bare data, no history.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& tensor);
  // The data of `value` with the place in the graph of `history`, a tensor of the same values
  // (an op that computes on a contiguous copy of its input saves the copy with the input's
  // history).
  SavedTensor(const Tensor& value, const Tensor& history);
  Tensor get() const;

 private:
  Tensor value_;
  uint64_t version_ = 0;
  std::shared_ptr<Node> grad_fn_;           // set when the tensor was computed by a recorded op
  std::shared_ptr<TensorImpl> leaf_;        // set when it was a leaf that requires grad
  std::weak_ptr<TensorImpl> source_;        // the tensor saved, to recognise an op's own output
};

inline SavedTensor save(const Tensor& tensor) { return SavedTensor(tensor); }
inline SavedTensor save(const Tensor& value, const Tensor& history) { return SavedTensor(value, history); }

// Packs gradients into the vector a BackwardFn returns.
template <class... T>
std::vector<Tensor> grads(T&&... gradients) {
  return std::vector<Tensor>{std::forward<T>(gradients)...};
}

// True when grad mode is on and some input requires grad: the op must be recorded.
bool any_requires_grad(std::initializer_list<Tensor> inputs);
inline bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

// Makes `output` the result of a graph node for `op` when any input requires grad; does
// nothing otherwise (the closure is then never called). In anomaly mode, checks `output` for
// NaN/inf first. Returns `output`.
Tensor record_node(const char* op, const Tensor& output, std::span<const Tensor> inputs, BackwardFn backward);
void check_finite(const char* op, const Tensor& output);

template <class Backward>
Tensor record(const char* op, const Tensor& output, std::initializer_list<Tensor> inputs, Backward&& backward) {
  if (AnomalyMode::is_enabled()) check_finite(op, output);
  if (!any_requires_grad(inputs)) return output;
  return record_node(op, output, std::span<const Tensor>(inputs.begin(), inputs.size()),
                     BackwardFn(std::forward<Backward>(backward)));
}

template <class Backward>
Tensor record(const char* op, const Tensor& output, const std::vector<Tensor>& inputs, Backward&& backward) {
  if (AnomalyMode::is_enabled()) check_finite(op, output);
  if (!any_requires_grad(inputs)) return output;
  return record_node(op, output, inputs, BackwardFn(std::forward<Backward>(backward)));
}

// For ops whose output has no gradient (argmax, comparisons, random numbers): they are never
// recorded, but anomaly mode still checks them.
inline Tensor non_differentiable(const char* op, const Tensor& output) {
  if (AnomalyMode::is_enabled()) check_finite(op, output);
  return output;
}

// In-place ops. check_inplace runs before the write: in grad mode it refuses a leaf that
// requires grad (its .grad would no longer describe the value) and a view taking part in
// autograd (its base's history would need rewriting). record_inplace runs after: x's history
// becomes a node whose inputs are x's previous value and `others`, so backward returns one
// gradient for the old x followed by one per other input.
void check_inplace(const char* op, const Tensor& x, std::initializer_list<Tensor> others);

template <class Backward>
void record_inplace(const char* op, const Tensor& x, std::initializer_list<Tensor> others, Backward&& backward) {
  std::vector<Tensor> inputs{x};
  inputs.insert(inputs.end(), others.begin(), others.end());
  if (AnomalyMode::is_enabled()) check_finite(op, x);
  if (!any_requires_grad(inputs)) return;
  record_node(op, x, inputs, BackwardFn(std::forward<Backward>(backward)));
}

// Runs backpropagation from `root` into the leaves' .grad; Tensor::backward calls it. With
// create_graph the pass runs in grad mode, so the gradients are themselves recorded
// (core/autograd/grad.h).
void run_backward(const Tensor& root, const Tensor& gradient, const BackwardOptions& options);

namespace detail {
// The node whose backward is running in a create_graph pass on this thread (null otherwise):
// SavedTensor::get re-attaches a saved output to it.
const std::shared_ptr<Node>& current_backward_node();
}  // namespace detail

}  // namespace ember::autograd
