// The backward pass, as micrograd does it: sort the graph topologically, then walk it from the
// outputs back, each node turning the summed gradient of its output into gradients of its inputs.
//
// 1. topological_order: every node reachable from the outputs, each after all the nodes that
//    send it a gradient (Kahn's algorithm, with a stack instead of recursion, so a graph of
//    100,000 ops does not overflow the call stack).
// 2. execute: walk that order. A gradient sent along an edge to a node adds into the node's
//    pending sum; by the node's turn every edge into it has delivered, and its backward runs.
// 3. A gradient that leaves the graph, at a leaf, goes to a sink. backward() has one that adds it
//    into the leaf's .grad and runs the leaf's post-accumulate-grad hooks (core/autograd/hooks.h)
//    once its last gradient is in; autograd::grad (core/autograd/grad.h) has one that keeps the
//    gradients of the tensors it was asked about, touches no .grad, and trims the walk to the
//    nodes that lead to them.
//
// Under create_graph the walk runs in grad mode: each node's backward records the ops it uses,
// so the gradients it produces are differentiable in turn.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/grad.h"
#include "core/autograd/hooks.h"
#include "core/autograd/record.h"
#include "core/capture_rollback.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"

namespace ember::autograd {
namespace {

// ---- The order of the walk ---------------------------------------------------------------

// Every node reachable from `roots`, outputs first: a node comes after every node with an edge
// into it. Ready nodes are taken from the back of a stack, so the order (and with it the order
// in which gradients are summed, and hooks run) is the same from one run to the next.
std::vector<Node*> topological_order(const std::vector<Edge>& roots) {
  // How many edges point at each reachable node.
  std::unordered_map<Node*, int> edges_in;
  std::vector<Node*> stack;
  for (const Edge& root : roots) {
    if (root.node && edges_in.try_emplace(root.node.get(), 0).second) stack.push_back(root.node.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& edge : node->inputs) {
      if (!edge.node) continue;
      auto [count, first_visit] = edges_in.try_emplace(edge.node.get(), 0);
      ++count->second;
      if (first_visit) stack.push_back(edge.node.get());
    }
  }

  // A node is ready once every node with an edge into it is in the order.
  std::vector<Node*> order, ready;
  for (const Edge& root : roots) {
    Node* node = root.node.get();
    if (node && edges_in[node] == 0 && std::find(ready.begin(), ready.end(), node) == ready.end()) {
      ready.push_back(node);
    }
  }
  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    order.push_back(node);
    for (const Edge& edge : node->inputs) {
      if (edge.node && --edges_in[edge.node.get()] == 0) ready.push_back(edge.node.get());
    }
  }
  return order;
}

// ---- Adding gradients up -------------------------------------------------------------------

// Adds `gradient` into `sum`. An undefined tensor stands for zero, so the first gradient is
// taken as it is and an undefined one changes nothing.
void accumulate(Tensor& sum, const Tensor& gradient) {
  if (!gradient.defined()) return;
  sum = sum.defined() ? add(sum, gradient) : gradient;
}

// The first value of a .grad. It must not alias another tensor (an optimizer's in-place update
// of one parameter's gradient must not change another's), so a gradient that anyone else holds
// is copied, detached and contiguous. Under create_graph it keeps its history: the copy is
// recorded, as a clone.
Tensor first_grad(const Tensor& gradient, bool create_graph) {
  if (create_graph && gradient.requires_grad()) return clone(gradient);
  const bool sole_owner = gradient.impl_ptr().use_count() == 1 && gradient.impl()->storage.use_count() == 1;
  if (sole_owner && gradient.is_contiguous() && !gradient.requires_grad()) return gradient;
  return gradient.detach().clone();
}

// A gradient assigned during a CUDA graph capture lives in the graph's private memory, which is
// written only by replays: if the capture fails, the leaf gets back the gradient it had.
void remember_gradient_for_capture_rollback(const std::shared_ptr<TensorImpl>& leaf) {
  cuda::on_capture_failure([weak = std::weak_ptr<TensorImpl>(leaf), previous = leaf->grad] {
    if (const auto alive = weak.lock()) alive->grad = previous;
  });
}

void accumulate_into_grad(const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient, bool create_graph) {
  if (!gradient.defined()) return;
  if (cuda::capture_rollback_is_open()) [[unlikely]] remember_gradient_for_capture_rollback(leaf);
  Tensor& grad = leaf->grad;
  accumulate(grad, grad.defined() ? gradient : first_grad(gradient, create_graph));
}

// ---- Running one node ----------------------------------------------------------------------

thread_local std::shared_ptr<Node> running_node;
thread_local bool running_grad_call = false;

// Marks a pass as an autograd::grad call for its duration (passes nest: a backward may run one).
class PassKind {
 public:
  explicit PassKind(bool grad_call) : previous_(running_grad_call) { running_grad_call = grad_call; }
  ~PassKind() { running_grad_call = previous_; }
  PassKind(const PassKind&) = delete;
  PassKind& operator=(const PassKind&) = delete;

 private:
  bool previous_;
};

// Marks the node whose backward runs (under create_graph), for SavedTensor::get; nests, since a
// backward may itself run a backward pass (autograd::checkpoint, a custom function).
class RunningNode {
 public:
  RunningNode(Node& node, bool create_graph) : previous_(std::move(running_node)) {
    running_node = create_graph ? node.shared_from_this() : nullptr;
  }
  ~RunningNode() { running_node = std::move(previous_); }
  RunningNode(const RunningNode&) = delete;
  RunningNode& operator=(const RunningNode&) = delete;

 private:
  std::shared_ptr<Node> previous_;
};

// One gradient per input of `node`, from the gradient of its output. Without retain_graph the
// node's closure, and with it the tensors it saved, is freed.
std::vector<Tensor> run_node(Node& node, const Tensor& grad_output, bool retain_graph, bool create_graph) {
  EMBER_CHECK(node.backward != nullptr,
              "backward: trying to backward through the graph a second time ({}'s saved tensors were "
              "already freed); call backward(gradient, {{.retain_graph = true}}) the first time",
              node.name());
  std::vector<Tensor> input_gradients;
  try {
    RunningNode running(node, create_graph);
    input_gradients = node.backward(grad_output);
  } catch (const Error& error) {
    fail("{}: {}", node.name(), error.what());
  }
  if (!retain_graph) node.backward = nullptr;
  EMBER_CHECK(input_gradients.size() == node.inputs.size(), "{}: backward returned {} gradients for {} inputs",
              node.name(), input_gradients.size(), node.inputs.size());
  return input_gradients;
}

void check_gradient(const Node& node, size_t input, const Tensor& gradient, const Tensor& grad_output,
                    bool create_graph) {
  const Shape& expected = node.input_shapes[input];
  EMBER_CHECK(gradient.sizes() == expected,
              "{}: backward returned a gradient of shape {} for input {} of shape {}", node.name(),
              shape_str(gradient.sizes()), input, shape_str(expected));
  // A backward is linear in the gradient it receives: when that gradient has a history, what it
  // returns must have one too. A backward computed by a kernel that records nothing would
  // otherwise hand out a silently constant second derivative.
  EMBER_CHECK(!create_graph || !grad_output.requires_grad() || gradient.requires_grad(),
              "{}: its backward is not differentiable (create_graph): the gradient of input {} was computed "
              "without recording",
              node.name(), input);
  if (AnomalyMode::is_enabled()) {
    try {
      check_finite(node.op.c_str(), gradient);
    } catch (const Error&) {
      fail("{}: backward produced NaN or inf in the gradient of input {} (anomaly mode)", node.name(), input);
    }
  }
}

// ---- Where the gradients go ----------------------------------------------------------------

// The walk is the same for backward() and autograd::grad(); what differs is what happens to the
// gradients that reach leaves, and which nodes need to run at all.
class GradientSink {
 public:
  virtual ~GradientSink() = default;
  // Sees the walk before it starts: the edges to the outputs, and the nodes in the order they
  // will run, of which it may drop those that lead to no gradient it wants.
  virtual void plan(const std::vector<Edge>& roots, std::vector<Node*>& order) = 0;
  // The complete gradient of a node's output, before its turn; returns whether its backward runs.
  virtual bool take_output_gradient(Node& node, const Tensor& gradient) = 0;
  // A gradient reaching a leaf along one edge (undefined: zero).
  virtual void take_leaf_gradient(const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient) = 0;
};

// backward(): gradients add into the leaves' .grad. With hooks registered, it counts the edges
// into each leaf, so that the leaf's hooks run when the last of them has delivered.
class AccumulateIntoGrad final : public GradientSink {
 public:
  explicit AccumulateIntoGrad(bool create_graph)
      : create_graph_(create_graph), hooks_(detail::has_post_accumulate_grad_hooks()) {}

  void plan(const std::vector<Edge>& roots, std::vector<Node*>& order) override {
    if (!hooks_) return;
    for (const Edge& root : roots) {
      if (root.leaf) ++edges_left_[root.leaf.get()];
    }
    for (const Node* node : order) {
      for (const Edge& edge : node->inputs) {
        if (edge.leaf) ++edges_left_[edge.leaf.get()];
      }
    }
  }

  bool take_output_gradient(Node&, const Tensor&) override { return true; }

  void take_leaf_gradient(const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient) override {
    accumulate_into_grad(leaf, gradient, create_graph_);
    if (hooks_ && --edges_left_[leaf.get()] == 0) detail::run_post_accumulate_grad_hooks(leaf);
  }

 private:
  bool create_graph_;
  bool hooks_;
  std::unordered_map<TensorImpl*, int> edges_left_;
};

// autograd::grad: the gradients of the tensors it asks about, one slot per distinct tensor (a
// leaf, or the node that computed a non-leaf), each the sum of what reaches it. No .grad changes.
class CaptureGradients final : public GradientSink {
 public:
  size_t add_slot(const Tensor& tensor) {
    const size_t next = gradients_.size();
    const size_t slot = tensor.is_leaf() ? leaf_slots_.try_emplace(tensor.impl(), next).first->second
                                         : node_slots_.try_emplace(tensor.grad_fn().get(), next).first->second;
    if (slot == next) {
      gradients_.emplace_back();
      reached_.push_back(false);
    }
    return slot;
  }
  // Whether any gradient reached the slot; its sum is undefined when all of them were zero.
  bool reached(size_t slot) const { return reached_[slot]; }
  const Tensor& gradient(size_t slot) const { return gradients_[slot]; }

  // Only the nodes between the outputs and a captured tensor stay in the walk. Of those, a
  // node runs its backward when an input leads on to a captured tensor; a captured node whose
  // inputs lead nowhere wanted is only read. Decided from the inputs' end of the order.
  void plan(const std::vector<Edge>&, std::vector<Node*>& order) override {
    std::unordered_set<Node*> wanted;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* node = *it;
      bool runs = false;
      for (const Edge& edge : node->inputs) {
        if (edge.leaf && leaf_slots_.contains(edge.leaf.get())) runs = true;
        if (edge.node && wanted.contains(edge.node.get())) runs = true;
      }
      if (runs) runs_.insert(node);
      if (runs || node_slots_.contains(node)) wanted.insert(node);
    }
    std::erase_if(order, [&](Node* node) { return !wanted.contains(node); });
  }

  bool take_output_gradient(Node& node, const Tensor& gradient) override {
    const auto slot = node_slots_.find(&node);
    if (slot != node_slots_.end()) deliver(slot->second, gradient);
    return runs_.contains(&node);
  }

  void take_leaf_gradient(const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient) override {
    const auto slot = leaf_slots_.find(leaf.get());
    if (slot != leaf_slots_.end()) deliver(slot->second, gradient);
  }

 private:
  void deliver(size_t slot, const Tensor& gradient) {
    reached_[slot] = true;
    accumulate(gradients_[slot], gradient);
  }

  std::unordered_map<TensorImpl*, size_t> leaf_slots_;
  std::unordered_map<Node*, size_t> node_slots_;
  std::vector<Tensor> gradients_;
  std::vector<bool> reached_;
  std::unordered_set<Node*> runs_;
};

// ---- The walk ------------------------------------------------------------------------------

// Where the gradient of `output` goes: into the node that computed it, or into the leaf itself.
Edge edge_to(const Tensor& output) {
  if (output.is_leaf()) return Edge{.node = nullptr, .leaf = output.impl_ptr()};
  return Edge{.node = output.grad_fn(), .leaf = nullptr};
}

void execute(const std::vector<Tensor>& outputs, const std::vector<Tensor>& output_gradients,
             const BackwardOptions& options, GradientSink& sink) {
  const bool create_graph = options.create_graph;
  const bool retain_graph = options.retain_graph.value_or(create_graph);
  GradModeGuard grad_mode(create_graph);  // on under create_graph, even inside NoGradGuard
  autocast::detail::Suspend no_autocast;  // each backward computes in the dtypes its forward saw
  detail::CallbackScope callbacks;

  std::vector<Edge> roots;
  for (const Tensor& output : outputs) roots.push_back(edge_to(output));
  std::vector<Node*> order = topological_order(roots);
  sink.plan(roots, order);

  // The gradient summed so far for the output of each node in the walk.
  std::unordered_map<Node*, Tensor> pending;
  for (Node* node : order) pending.emplace(node, Tensor());
  auto send = [&](const Edge& edge, const Tensor& gradient) {
    if (edge.leaf) {
      sink.take_leaf_gradient(edge.leaf, gradient);
    } else if (edge.node) {
      const auto sum = pending.find(edge.node.get());
      if (sum != pending.end()) accumulate(sum->second, gradient);
    }
  };

  for (size_t i = 0; i < roots.size(); ++i) send(roots[i], output_gradients[i]);
  for (Node* node : order) {
    Tensor grad_output = std::move(pending[node]);
    if (!grad_output.defined()) {
      // Reached only by zero (undefined) gradients: explicit zeros, so that the node's inputs
      // still get a gradient of their shape.
      grad_output = zeros(node->output_shape, TensorOptions(node->output_dtype).device(node->output_device));
    }
    if (!sink.take_output_gradient(*node, grad_output)) continue;
    const std::vector<Tensor> input_gradients = run_node(*node, grad_output, retain_graph, create_graph);
    for (size_t i = 0; i < node->inputs.size(); ++i) {
      const Edge& edge = node->inputs[i];
      const Tensor& gradient = input_gradients[i];
      if (gradient.defined()) check_gradient(*node, i, gradient, grad_output, create_graph && edge.needs_grad());
      send(edge, gradient);
    }
  }
  callbacks.run();
}

// The gradient of `output` when none is given: 1 for a one-element output, an error otherwise.
Tensor root_gradient(const char* api, const Tensor& output, const Tensor& gradient) {
  if (!gradient.defined()) {
    EMBER_CHECK(output.numel() == 1,
                "{}: grad can be implicitly created only for one-element outputs; got shape {} "
                "(pass a gradient of that shape)",
                api, shape_str(output.sizes()));
    return ones_like(output);
  }
  EMBER_CHECK(gradient.sizes() == output.sizes(), "{}: gradient of shape {} for a tensor of shape {}", api,
              shape_str(gradient.sizes()), shape_str(output.sizes()));
  EMBER_CHECK(gradient.dtype() == output.dtype() && gradient.device() == output.device(),
              "{}: gradient is {} on {}, tensor is {} on {}", api, gradient.dtype(), gradient.device(),
              output.dtype(), output.device());
  return gradient;
}

}  // namespace

namespace detail {
const std::shared_ptr<Node>& current_backward_node() { return running_node; }
bool in_grad_call() { return running_grad_call; }
}  // namespace detail

void run_backward(const Tensor& root, const Tensor& gradient, const BackwardOptions& options) {
  EMBER_CHECK(root.defined(), "backward: tensor is undefined");
  EMBER_CHECK(root.requires_grad(),
              "backward: tensor does not require grad and has no grad_fn (did you forget "
              "requires_grad_(), or run the forward pass under NoGradGuard?)");
  const std::vector<Tensor> root_gradients{root_gradient("backward", root, gradient)};
  PassKind kind(/*grad_call=*/false);
  AccumulateIntoGrad sink(options.create_graph);
  execute({root}, root_gradients, options, sink);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& options) {
  EMBER_CHECK(!outputs.empty(), "grad: no outputs given");
  // As torch.autograd.grad: with no inputs there is nothing to differentiate with respect to,
  // and an empty answer would hide the mistake.
  EMBER_CHECK(!inputs.empty(), "grad: no inputs given (the tensors to differentiate with respect to)");
  EMBER_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
              "grad: {} grad_outputs for {} outputs (give one per output, or none for one-element outputs)",
              grad_outputs.size(), outputs.size());
  std::vector<Tensor> root_gradients;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& output = outputs[i];
    EMBER_CHECK(output.defined(), "grad: output {} is undefined", i);
    EMBER_CHECK(output.requires_grad(),
                "grad: output {} (shape {}) does not require grad and has no grad_fn: it does not depend on "
                "anything being differentiated",
                i, shape_str(output.sizes()));
    root_gradients.push_back(root_gradient("grad", output, grad_outputs.empty() ? Tensor() : grad_outputs[i]));
  }

  CaptureGradients sink;
  std::vector<size_t> slot_of(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    EMBER_CHECK(input.defined(), "grad: input {} is undefined", i);
    EMBER_CHECK(input.requires_grad(), "grad: input {} (shape {}) does not require grad", i,
                shape_str(input.sizes()));
    slot_of[i] = sink.add_slot(input);
  }

  PassKind kind(/*grad_call=*/true);
  execute(outputs, root_gradients, options.backward_options(), sink);

  std::vector<Tensor> gradients(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t slot = slot_of[i];
    if (!sink.reached(slot)) {
      EMBER_CHECK(options.allow_unused,
                  "grad: input {} (shape {}) is not used in the graph of the outputs (pass allow_unused = true "
                  "to get an undefined gradient for it instead)",
                  i, shape_str(inputs[i].sizes()));
      continue;
    }
    // Reached, but only by zero (undefined) gradients: an explicit zero.
    gradients[i] = sink.gradient(slot).defined() ? sink.gradient(slot) : zeros_like(inputs[i].detach());
  }
  return gradients;
}

}  // namespace ember::autograd
