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
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& tensor);
  const Tensor& get() const;

 private:
  Tensor value_;
  uint64_t version_ = 0;
};

inline SavedTensor save(const Tensor& tensor) { return SavedTensor(tensor); }

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

// Runs backpropagation from `root`; Tensor::backward calls it.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace ember::autograd
