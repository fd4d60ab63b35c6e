// Activation checkpointing, as torch.utils.checkpoint does it: trade compute for memory by
// keeping only a block's inputs and recomputing its forward during backward.
//
//   Tensor h = autograd::checkpoint([&](const std::vector<Tensor>& in) { return layer.forward(in[0]); }, {x});
//
// The forward runs without recording, so none of fn's intermediate activations stay alive; one
// graph node holds fn's inputs. Its backward runs fn again with recording, with the random
// state and autocast state the forward had (so dropout draws the same masks and products
// round the same way), and backpropagates through that: parameters fn uses get their
// gradients there, as in a plain backward. The cost is one more forward of fn per backward.
//
// When no input requires grad, fn simply runs (and records as usual, parameters included):
// give the first block of a stack an input that requires grad to checkpoint it too.
//
// Differentiable once: the recomputation accumulates into parameters' .grad, so it cannot
// serve autograd::grad's "touch no .grad", nor create_graph; both throw, naming checkpoint.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs);

}  // namespace ember::autograd
