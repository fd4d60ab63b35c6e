// Cross-entropy between logits and class indices, fused: log_softmax and the negative log
// likelihood in one kernel, and a backward that is softmax minus the (smoothed) target.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// Per-row losses of logits [rows, C] with targets [rows] (contiguous, checked), and each row's
// logsumexp as row_max + log_sum, log_sum = log sum_c exp(x[c] - row_max).
extern KernelTable<void(const Tensor& losses, const Tensor& row_max, const Tensor& log_sum, const Tensor& logits,
                        const Tensor& targets, int64_t ignore_index, double label_smoothing)>
    cross_entropy;
// grad_logits = (softmax - smoothed one-hot) * row_scale per row, zero for ignored rows.
extern KernelTable<void(const Tensor& grad_logits, const Tensor& row_scale, const Tensor& logits,
                        const Tensor& targets, const Tensor& row_max, const Tensor& log_sum,
                        int64_t ignore_index, double label_smoothing)>
    cross_entropy_backward;
}  // namespace kernels

enum class Reduction { None, Mean, Sum };

// The target that contributes nothing to a loss (PyTorch's -100): what a label is where nothing is
// predicted (a masked-LM label at an unchosen position, padding).
inline constexpr int64_t kIgnoreIndex = -100;

struct CrossEntropyOptions {
  int64_t ignore_index = kIgnoreIndex;  // targets equal to it contribute nothing (and no gradient)
  double label_smoothing = 0.0;  // in [0, 1]: mixes the one-hot target with uniform
  Reduction reduction = Reduction::Mean;  // Mean divides by the number of non-ignored targets
};

// logits [..., C] with the class dim last (a [N, C] batch, or [N, T, C] for sequences) and
// int64 targets [...] in [0, C) or equal to ignore_index. Reduction::None returns [...].
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, CrossEntropyOptions options = {});

// For ops built on cross_entropy's kernels (linear_cross_entropy):
// How many targets count towards a mean: those not equal to ignore_index, as a 0-d tensor of
// `dtype` on the targets' device, so that dividing by it never reads anything back.
Tensor counted_targets(const Tensor& targets, int64_t ignore_index, DType dtype);
// The gradient of the loss with respect to logits [rows, C] when each row's loss has gradient
// row_scale [rows] (already divided by the count for a mean), written with differentiable ops:
// what a backward under create_graph computes, where the fused kernel, which reads statistics
// saved without history, cannot serve. Ignored rows get zero.
Tensor differentiable_cross_entropy_backward(const Tensor& row_scale, const Tensor& logits, const Tensor& targets,
                                             const CrossEntropyOptions& options);

}  // namespace ember
