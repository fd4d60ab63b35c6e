// Recording ops into the graph, saved tensors, grad mode and anomaly mode.
#include "core/autograd/record.h"

#include <cctype>
#include <cmath>

#include "core/ops/copy.h"
#include "core/ops/reduce.h"
#include "core/ops/unary.h"

namespace ember {
namespace {
thread_local bool grad_mode_enabled = true;
bool anomaly_mode_enabled = false;
}  // namespace

bool GradMode::is_enabled() { return grad_mode_enabled; }
void GradMode::set_enabled(bool enabled) { grad_mode_enabled = enabled; }
bool AnomalyMode::is_enabled() { return anomaly_mode_enabled; }
void AnomalyMode::set_enabled(bool enabled) { anomaly_mode_enabled = enabled; }

namespace autograd {

std::string Node::name() const {
  // "layer_norm" -> "LayerNormBackward", the way PyTorch names grad_fn classes.
  std::string name;
  bool upper = true;
  for (char c : op) {
    if (c == '_' || c == ' ') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return name + "Backward";
}

Node::~Node() {
  // The closure goes first: under create_graph its saved tensors may own predecessors too,
  // and they must be released before the loop below counts owners.
  backward = nullptr;
  // Steal the edges of every predecessor we are the last owner of, and destroy those nodes
  // only once their edges are empty: the chain is freed by this loop, not by recursion.
  std::vector<std::shared_ptr<Node>> stack;
  for (Edge& edge : inputs) {
    if (edge.node) stack.push_back(std::move(edge.node));
  }
  while (!stack.empty()) {
    std::shared_ptr<Node> node = std::move(stack.back());
    stack.pop_back();
    if (node.use_count() == 1) {
      for (Edge& edge : node->inputs) {
        if (edge.node) stack.push_back(std::move(edge.node));
      }
      node->backward = nullptr;  // saved tensors could own graph pieces via user closures
    }
  }
}

SavedTensor::SavedTensor(const Tensor& tensor) : SavedTensor(tensor, tensor) {}

SavedTensor::SavedTensor(const Tensor& value, const Tensor& history) {
  if (!value.defined()) return;
  value_ = value.detach();
  version_ = value.version();
  source_ = history.impl_ptr();
  if (history.requires_grad()) {
    if (history.grad_fn()) {
      grad_fn_ = history.grad_fn();
    } else {
      leaf_ = history.impl_ptr();
    }
  }
}

Tensor SavedTensor::get() const {
  if (value_.defined() && value_.version() != version_) {
    fail("a tensor saved for backward (shape {}) was modified by an in-place operation after it was saved "
         "(version {} when saved, now {}); use an out-of-place op or clone() it first",
         shape_str(value_.sizes()), version_, value_.version());
  }
  if (!GradMode::is_enabled() || !value_.defined()) return value_;
  // Under create_graph: the tensor with its history, so that what backward computes from it
  // is differentiable with respect to it.
  if (leaf_) return Tensor(leaf_);
  std::shared_ptr<Node> history = grad_fn_;
  if (!history) {
    const std::shared_ptr<Node>& running = detail::current_backward_node();
    const bool is_output = running && !source_.owner_before(running->output) && !running->output.owner_before(source_);
    if (is_output) history = running;
  }
  if (!history) return value_;
  Tensor attached = value_.detach();
  attached.impl()->requires_grad = true;
  attached.impl()->grad_fn = std::move(history);
  return attached;
}

bool any_requires_grad(std::initializer_list<Tensor> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

Tensor record_node(const char* op, const Tensor& output, std::span<const Tensor> inputs, BackwardFn backward) {
  auto node = std::make_shared<Node>();
  node->op = op;
  node->inputs.reserve(inputs.size());
  node->input_shapes.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    Edge edge;
    if (input.defined() && input.requires_grad()) {
      if (input.grad_fn()) {
        edge.node = input.grad_fn();
      } else {
        edge.leaf = input.impl_ptr();
      }
    }
    node->inputs.push_back(std::move(edge));
    node->input_shapes.push_back(input.defined() ? input.sizes() : Shape{});
  }
  node->backward = std::move(backward);
  node->output_shape = output.sizes();
  node->output_dtype = output.dtype();
  node->output_device = output.device();
  node->output = output.impl_ptr();
  output.impl()->requires_grad = true;
  output.impl()->grad_fn = std::move(node);
  return output;
}

void check_inplace(const char* op, const Tensor& x, std::initializer_list<Tensor> others) {
  EMBER_CHECK(x.defined(), "{}: tensor is undefined", op);
  if (!GradMode::is_enabled()) return;
  EMBER_CHECK(!(x.is_leaf() && x.requires_grad()),
              "{}: a leaf tensor that requires grad is used in an in-place operation (wrap the update in "
              "NoGradGuard, as optimizers do, or clone() the tensor first)",
              op);
  bool involved = x.requires_grad();
  for (const Tensor& other : others) involved = involved || (other.defined() && other.requires_grad());
  EMBER_CHECK(!(x.impl()->is_view && involved),
              "{}: in-place operation on a view that takes part in autograd is not supported (use the "
              "out-of-place op instead)",
              op);
}

void check_finite(const char* op, const Tensor& output) {
  if (!output.defined() || !is_floating_point(output.dtype()) || output.numel() == 0) return;
  NoGradGuard no_grad;
  const bool finite = all(isfinite(output.detach())).item<bool>();
  EMBER_CHECK(finite, "{}: produced NaN or inf in its output of shape {} (anomaly mode)", op,
              shape_str(output.sizes()));
}

}  // namespace autograd
}  // namespace ember
