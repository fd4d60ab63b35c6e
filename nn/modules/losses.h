// Loss functions, as torch.nn.functional's: cross-entropy, negative log likelihood, mean
// squared error and binary cross-entropy on logits. Each is differentiable in its inputs.
#pragma once

#include <cstdint>

#include "core/ops/cross_entropy.h"
#include "core/tensor.h"

namespace ember::nn {

using ember::CrossEntropyOptions;
using ember::kIgnoreIndex;
using ember::Reduction;

// Cross-entropy of logits [..., C] (class dim last) against int64 class indices [...]: the
// fused core op, with its ignore_index, label_smoothing and reduction.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, CrossEntropyOptions options = {});

// Negative log likelihood of log-probabilities [..., C] (class dim last, e.g. log_softmax's
// output) at int64 class indices [...]: -log_probs[..., target]. Targets equal to ignore_index
// contribute 0 and no gradient; Mean divides by the number of the others (NaN when there are
// none, as in PyTorch).
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index = kIgnoreIndex,
                Reduction reduction = Reduction::Mean);

// (input - target)^2, with input and target of the same shape and dtype.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

// Binary cross-entropy of probabilities sigmoid(logits) against targets in [0, 1] of the same
// shape, computed from the logits without overflow:
//   max(x, 0) - x * y + log(1 + exp(-|x|)).
// pos_weight (optional, broadcast to the logits' shape, typically [C]) weighs the positive term:
//   (1 - y) * x + (1 + (pos_weight - 1) * y) * (log(1 + exp(-|x|)) + max(-x, 0)).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        Reduction reduction = Reduction::Mean, const Tensor& pos_weight = Tensor());

}  // namespace ember::nn
