// The backward pass: walk the graph from the root in reverse topological order, without
// recursion, handing each node the sum of the gradients that reached its output.
//
// 1. Count, for every node reachable from the root, how many edges point at it.
// 2. Start from the root with the given gradient. A node is ready once every edge into it has
//    delivered its gradient (its count reaches 0); then it runs and passes gradients on.
// 3. Gradients that reach a leaf add into its .grad. Once every edge into a leaf has delivered,
//    the leaf's post-accumulate-grad hooks run (core/autograd/hooks.h); callbacks queued during
//    the pass run at its end.
#include <unordered_map>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/hooks.h"
#include "core/capture_rollback.h"
#include "core/autograd/record.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"

namespace ember::autograd {
namespace {

std::unordered_map<Node*, int> count_dependencies(Node* root) {
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root};
  dependencies[root] = 0;
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

void accumulate_into_leaf(const std::shared_ptr<TensorImpl>& leaf_ptr, const Tensor& gradient) {
  TensorImpl& leaf = *leaf_ptr;
  if (cuda::capture_rollback_is_open()) [[unlikely]] remember_gradient_for_capture_rollback(leaf_ptr);
  if (!leaf.grad.defined()) {
    leaf.grad = owned_gradient(gradient);
  } else {
    leaf.grad = add(leaf.grad, gradient);
  }
}

void check_gradient(const Node& node, size_t input, const Tensor& gradient) {
  const Shape& expected = node.input_shapes[input];
  EMBER_CHECK(gradient.sizes() == expected,
              "{}: backward returned a gradient of shape {} for input {} of shape {}", node.name(),
              shape_str(gradient.sizes()), input, shape_str(expected));
  if (AnomalyMode::is_enabled()) {
    try {
      check_finite(node.op.c_str(), gradient);
    } catch (const Error&) {
      fail("{}: backward produced NaN or inf in the gradient of input {} (anomaly mode)", node.name(), input);
    }
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  EMBER_CHECK(root.defined(), "backward: tensor is undefined");
  EMBER_CHECK(root.requires_grad(),
              "backward: tensor does not require grad and has no grad_fn (did you forget "
              "requires_grad_(), or run the forward pass under NoGradGuard?)");
  Tensor root_gradient = gradient;
  if (!root_gradient.defined()) {
    EMBER_CHECK(root.numel() == 1,
                "backward: grad can be implicitly created only for one-element outputs; got shape {} "
                "(pass a gradient of that shape)",
                shape_str(root.sizes()));
    root_gradient = ones_like(root);
  }
  EMBER_CHECK(root_gradient.sizes() == root.sizes(), "backward: gradient of shape {} for a tensor of shape {}",
              shape_str(root_gradient.sizes()), shape_str(root.sizes()));
  EMBER_CHECK(root_gradient.dtype() == root.dtype() && root_gradient.device() == root.device(),
              "backward: gradient is {} on {}, tensor is {} on {}", root_gradient.dtype(), root_gradient.device(),
              root.dtype(), root.device());

  NoGradGuard no_grad;  // gradients are computed without building a graph of their own
  autocast::detail::Suspend no_autocast;  // each backward computes in the dtypes its forward saw
  detail::CallbackScope callbacks;
  const bool hooks = detail::has_post_accumulate_grad_hooks();
  if (root.is_leaf()) {
    accumulate_into_leaf(root.impl_ptr(), root_gradient);
    if (hooks) detail::run_post_accumulate_grad_hooks(root.impl_ptr());
    callbacks.run();
    return;
  }

  Node* root_node = root.grad_fn().get();
  std::unordered_map<Node*, int> dependencies = count_dependencies(root_node);
  std::unordered_map<TensorImpl*, int> leaf_edges;
  if (hooks) leaf_edges = count_leaf_edges(dependencies);
  std::unordered_map<Node*, Tensor> pending;  // gradient summed so far for each node's output
  pending[root_node] = root_gradient;
  std::vector<Node*> ready{root_node};

  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    Tensor grad_output = std::move(pending[node]);
    pending.erase(node);

    EMBER_CHECK(node->backward != nullptr,
                "backward: trying to backward through the graph a second time ({}'s saved tensors were "
                "already freed); call backward(gradient, /*retain_graph=*/true) the first time",
                node->name());
    std::vector<Tensor> input_gradients;
    try {
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
      if (input_gradient.defined()) check_gradient(*node, i, input_gradient);
      if (edge.leaf) {
        if (input_gradient.defined()) accumulate_into_leaf(edge.leaf, input_gradient);
        if (hooks && --leaf_edges[edge.leaf.get()] == 0) detail::run_post_accumulate_grad_hooks(edge.leaf);
      } else if (edge.node) {
        Node* next = edge.node.get();
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

}  // namespace ember::autograd
