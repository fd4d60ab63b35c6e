// A node of the autograd graph: one recorded op, with the closure that turns the gradient of
// its output into gradients of its inputs, and an edge to where each input's gradient goes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

struct Node;

// Where the gradient of one input goes: to the node that produced it, or, for a leaf that
// requires grad, straight into that leaf's .grad. Neither is set for an input that needs no
// gradient.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<TensorImpl> leaf;
  bool needs_grad() const { return node != nullptr || leaf != nullptr; }
};

// Given the gradient of the op's output, returns one gradient per input, each shaped like that
// input (an undefined Tensor means zero).
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node : std::enable_shared_from_this<Node> {
  std::string op;  // "matmul", "layer_norm", ...: names the op in errors and in grad_fn
  std::vector<Edge> inputs;
  std::vector<Shape> input_shapes;  // to check what backward returns
  BackwardFn backward;              // emptied after backward unless retain_graph
  Shape output_shape;
  DType output_dtype = kFloat32;
  Device output_device;
  // The tensor this node produced, watched without being owned (an op saving its own output
  // would otherwise own itself): under create_graph a saved copy of it is re-attached to this
  // node (SavedTensor::get). Compared by owner, so it stays meaningful after the tensor is freed.
  std::weak_ptr<TensorImpl> output;

  // "MatmulBackward", the name printed as a tensor's grad_fn.
  std::string name() const;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Releases the chain of predecessors iteratively, so dropping a graph of 100,000 ops does
  // not recurse 100,000 destructors deep.
  ~Node();
};

}  // namespace ember::autograd
