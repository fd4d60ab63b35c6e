// The backward pass: walk the graph from the root in reverse topological order, without
// recursion, handing each node the sum of the gradients that reached its output.
//
// 1. Count, for every node reachable from the root, how many edges point at it.
// 2. Start from the root with the given gradient. A node is ready once every edge into it has
//    delivered its gradient (its count reaches 0); then it runs and passes gradients on.
// 3. Gradients that reach a leaf add into its .grad. Once every edge into a leaf has delivered,
//    the leaf's post-accumulate-grad hooks run (core/autograd/hooks.h); callbacks queued during
//    the pass run at its end.
//
// autograd::grad (core/autograd/grad.h) runs the same walk but hands back the gradients of the
// tensors it is asked about instead of touching any .grad, and runs only the nodes that lead
// to them. Under create_graph the walk runs in grad mode: each node's backward records the ops
// it uses, so the gradients it returns are differentiable in turn.
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/grad.h"
#include "core/autograd/hooks.h"
#include "core/capture_rollback.h"
#include "core/autograd/record.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"

namespace ember::autograd {
namespace {

std::unordered_map<Node*, int> count_dependencies(const std::vector<Node*>& roots) {
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack;
  for (Node* root : roots) {
    if (dependencies.try_emplace(root, 0).second) stack.push_back(root);
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& edge : node->inputs) {
      if (!edge.node) continue;
      auto [it, first_visit] = dependencies.try_emplace(edge.node.get(), 0);
      ++it->second;
      if (first_visit) stack.push_back(edge.node.get());
    }
  }
  return dependencies;
}

// How many edges point at each leaf, counted only when a hook wants to know when a leaf's
// gradient is complete.
std::unordered_map<TensorImpl*, int> count_leaf_edges(const std::unordered_map<Node*, int>& nodes) {
  std::unordered_map<TensorImpl*, int> edges;
  for (const auto& [node, count] : nodes) {
    for (const Edge& edge : node->inputs) {
      if (edge.leaf) ++edges[edge.leaf.get()];
    }
  }
  return edges;
}

// Takes ownership of a gradient when nobody else holds it, and copies it otherwise, so that
// .grad never aliases another tensor (an in-place update of one parameter's gradient must not
// change another's).
Tensor owned_gradient(const Tensor& gradient) {
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

void accumulate_into_leaf(const std::shared_ptr<TensorImpl>& leaf_ptr, const Tensor& gradient, bool create_graph) {
  TensorImpl& leaf = *leaf_ptr;
  if (cuda::capture_rollback_is_open()) [[unlikely]] remember_gradient_for_capture_rollback(leaf_ptr);
  if (!leaf.grad.defined()) {
    // Under create_graph the gradient keeps its history (a copy is recorded as a clone).
    leaf.grad = create_graph && gradient.requires_grad() ? clone(gradient) : owned_gradient(gradient);
  } else {
    leaf.grad = add(leaf.grad, gradient);
  }
}


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
  RunningNode(Node* node, bool create_graph) : previous_(std::move(running_node)) {
    running_node = create_graph ? node->shared_from_this() : nullptr;
  }
  ~RunningNode() { running_node = std::move(previous_); }
  RunningNode(const RunningNode&) = delete;
  RunningNode& operator=(const RunningNode&) = delete;

 private:
  std::shared_ptr<Node> previous_;
};

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


// The gradients a pass delivers to the tensors autograd::grad asks about: one slot per distinct
// tensor (a leaf, or the node that computed a non-leaf), the sum of what reaches it.
struct Captures {
  std::unordered_map<TensorImpl*, size_t> leaves;
  std::unordered_map<Node*, size_t> nodes;
  std::vector<Tensor> gradients;
  std::vector<bool> reached;

  void deliver(size_t slot, const Tensor& gradient) {
    reached[slot] = true;
    if (!gradient.defined()) return;
    Tensor& sum = gradients[slot];
    sum = sum.defined() ? add(sum, gradient) : gradient;
  }
};

// For autograd::grad: which nodes lead to a captured tensor (only those run), and, of those,
// which must run their backward (the ones with an input that leads on to a captured tensor; a
// captured node whose inputs lead nowhere wanted is read, not run).
struct Relevance {
  std::unordered_map<Node*, bool> needed, runs;
};

Relevance find_relevant(const std::vector<Node*>& roots, std::unordered_map<Node*, int> dependencies,
                        const Captures& captures) {
  // A topological order (outputs first) by the same counting the walk uses; then back to front.
  std::vector<Node*> order, ready;
  for (Node* root : roots) {
    if (dependencies[root] == 0 && std::find(ready.begin(), ready.end(), root) == ready.end()) ready.push_back(root);
  }
  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    order.push_back(node);
    for (const Edge& edge : node->inputs) {
      if (edge.node && --dependencies[edge.node.get()] == 0) ready.push_back(edge.node.get());
    }
  }
  Relevance relevance;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    bool runs = false;
    for (const Edge& edge : node->inputs) {
      if (edge.leaf && captures.leaves.contains(edge.leaf.get())) runs = true;
      if (edge.node && relevance.needed[edge.node.get()]) runs = true;
    }
    relevance.runs[node] = runs;
    relevance.needed[node] = runs || captures.nodes.contains(node);
  }
  return relevance;
}

// The walk itself, from several outputs at once. With `captures` it fills them and leaves every
// .grad alone; without, gradients reaching leaves add into their .grad.
void execute(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_gradients, bool retain_graph,
             bool create_graph, Captures* captures) {
  GradModeGuard grad_mode(create_graph);  // on under create_graph, even inside NoGradGuard
  PassKind kind(captures != nullptr);
  autocast::detail::Suspend no_autocast;  // each backward computes in the dtypes its forward saw
  detail::CallbackScope callbacks;
  const bool hooks = captures == nullptr && detail::has_post_accumulate_grad_hooks();

  std::vector<Node*> root_nodes;
  std::unordered_map<Node*, Tensor> pending;  // gradient summed so far for each node's output
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    if (root.is_leaf()) {
      if (captures) {
        auto slot = captures->leaves.find(root.impl());
        if (slot != captures->leaves.end()) captures->deliver(slot->second, root_gradients[i]);
      } else {
        accumulate_into_leaf(root.impl_ptr(), root_gradients[i], create_graph);
        if (hooks) detail::run_post_accumulate_grad_hooks(root.impl_ptr());
      }
      continue;
    }
    Node* node = root.grad_fn().get();
    Tensor& sum = pending[node];
    sum = sum.defined() ? add(sum, root_gradients[i]) : root_gradients[i];
    root_nodes.push_back(node);
  }

  std::unordered_map<Node*, int> dependencies = count_dependencies(root_nodes);
  std::unordered_map<TensorImpl*, int> leaf_edges;
  if (hooks) leaf_edges = count_leaf_edges(dependencies);
  Relevance relevance;
  if (captures) relevance = find_relevant(root_nodes, dependencies, *captures);
  auto is_needed = [&](Node* node) { return captures == nullptr || relevance.needed[node]; };

  std::vector<Node*> ready;
  for (Node* root : root_nodes) {
    if (dependencies[root] == 0 && is_needed(root) && std::find(ready.begin(), ready.end(), root) == ready.end()) {
      ready.push_back(root);
    }
  }

  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    Tensor grad_output = std::move(pending[node]);
    pending.erase(node);
    if (captures) {
      auto slot = captures->nodes.find(node);
      if (slot != captures->nodes.end()) captures->deliver(slot->second, grad_output);
      if (!relevance.runs[node]) continue;
    }

    EMBER_CHECK(node->backward != nullptr,
                "backward: trying to backward through the graph a second time ({}'s saved tensors were "
                "already freed); call backward(gradient, /*retain_graph=*/true) the first time",
                node->name());
    std::vector<Tensor> input_gradients;
    try {
      RunningNode running(node, create_graph);
      input_gradients = node->backward(grad_output);
    } catch (const Error& error) {
      fail("{}: {}", node->name(), error.what());
    }
    if (!retain_graph) node->backward = nullptr;  // frees the saved tensors
    EMBER_CHECK(input_gradients.size() == node->inputs.size(), "{}: backward returned {} gradients for {} inputs",
                node->name(), input_gradients.size(), node->inputs.size());

    for (size_t i = 0; i < node->inputs.size(); ++i) {
      const Edge& edge = node->inputs[i];
      Tensor& input_gradient = input_gradients[i];
      if (input_gradient.defined()) {
        check_gradient(*node, i, input_gradient, grad_output, create_graph && edge.needs_grad());
      }
      if (edge.leaf) {
        if (captures) {
          auto slot = captures->leaves.find(edge.leaf.get());
          if (slot != captures->leaves.end()) captures->deliver(slot->second, input_gradient);
          continue;
        }
        if (input_gradient.defined()) accumulate_into_leaf(edge.leaf, input_gradient, create_graph);
        if (hooks && --leaf_edges[edge.leaf.get()] == 0) detail::run_post_accumulate_grad_hooks(edge.leaf);
      } else if (edge.node) {
        Node* next = edge.node.get();
        if (!is_needed(next)) continue;
        if (input_gradient.defined()) {
          Tensor& sum = pending[next];
          sum = sum.defined() ? add(sum, input_gradient) : input_gradient;
        }
        if (--dependencies[next] == 0) {
          // Every path into `next` has delivered; a node reached only by zero gradients gets
          // explicit zeros so that its own inputs still see a gradient of the right shape.
          Tensor& sum = pending[next];
          if (!sum.defined()) {
            sum = zeros(next->output_shape, TensorOptions(next->output_dtype).device(next->output_device));
          }
          ready.push_back(next);
        }
      }
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

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph) {
  EMBER_CHECK(root.defined(), "backward: tensor is undefined");
  EMBER_CHECK(root.requires_grad(),
              "backward: tensor does not require grad and has no grad_fn (did you forget "
              "requires_grad_(), or run the forward pass under NoGradGuard?)");
  execute({root}, {root_gradient("backward", root, gradient)}, retain_graph, create_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& options) {
  EMBER_CHECK(!outputs.empty(), "grad: no outputs given");
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

  Captures captures;
  std::vector<size_t> slot_of(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    EMBER_CHECK(input.defined(), "grad: input {} is undefined", i);
    EMBER_CHECK(input.requires_grad(), "grad: input {} (shape {}) does not require grad", i,
                shape_str(input.sizes()));
    const size_t next_slot = captures.gradients.size();
    const size_t slot = input.is_leaf() ? captures.leaves.try_emplace(input.impl(), next_slot).first->second
                                        : captures.nodes.try_emplace(input.grad_fn().get(), next_slot).first->second;
    if (slot == next_slot) {
      captures.gradients.emplace_back();
      captures.reached.push_back(false);
    }
    slot_of[i] = slot;
  }

  execute(outputs, root_gradients, options.retain_graph.value_or(options.create_graph), options.create_graph,
          &captures);

  std::vector<Tensor> gradients(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t slot = slot_of[i];
    if (!captures.reached[slot]) {
      EMBER_CHECK(options.allow_unused,
                  "grad: input {} (shape {}) is not used in the graph of the outputs (pass allow_unused = true "
                  "to get an undefined gradient for it instead)",
                  i, shape_str(inputs[i].sizes()));
      continue;
    }
    // Reached, but only by zero (undefined) gradients: an explicit zero.
    gradients[i] = captures.gradients[slot].defined() ? captures.gradients[slot] : zeros_like(inputs[i].detach());
  }
  return gradients;
}

}  // namespace ember::autograd
