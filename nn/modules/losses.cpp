// Loss functions composed of differentiable core ops, so their gradients come from the ops'.
#include "nn/modules/losses.h"

#include <cmath>

#include "core/autocast.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/index_check.h"
#include "core/ops/indexing.h"
#include "core/ops/reduce.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"

namespace ember::nn {
namespace {

// `count` divides the sum for the mean: a number, or a scalar tensor on the losses' device.
template <class Count>
Tensor apply_reduction(const Tensor& losses, Reduction reduction, const Count& count) {
  switch (reduction) {
    case Reduction::None: return losses;
    case Reduction::Sum: return sum(losses);
    case Reduction::Mean: return div(sum(losses), count);
  }
  fail("loss: unknown reduction");
}

void check_same_shape_and_dtype(const char* op, const char* first_name, const Tensor& first,
                                const char* second_name, const Tensor& second) {
  EMBER_CHECK(first.defined() && second.defined(), "{}: {} or {} is undefined", op, first_name, second_name);
  EMBER_CHECK(is_floating_point(first.dtype()), "{}: {} must be floating point, got {}", op, first_name,
              first.dtype());
  EMBER_CHECK(first.dtype() == second.dtype(), "{}: {} has dtype {} but {} has dtype {}", op, first_name,
              first.dtype(), second_name, second.dtype());
  EMBER_CHECK(first.sizes() == second.sizes(), "{}: {} of shape {} and {} of shape {} must have the same shape", op,
              first_name, shape_str(first.sizes()), second_name, shape_str(second.sizes()));
  EMBER_CHECK(first.device() == second.device(), "{}: {} is on {} but {} is on {}", op, first_name, first.device(),
              second_name, second.device());
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, CrossEntropyOptions options) {
  return ember::cross_entropy(logits, targets, options);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, Reduction reduction) {
  if (auto cast = autocast::float32_operands(log_probs)) return nll_loss((*cast)[0], targets, ignore_index, reduction);
  EMBER_CHECK(log_probs.defined() && targets.defined(), "nll_loss: log_probs or targets is undefined");
  EMBER_CHECK(is_floating_point(log_probs.dtype()), "nll_loss: log_probs must be floating point, got {}",
              log_probs.dtype());
  EMBER_CHECK(targets.dtype() == kInt64, "nll_loss: targets must be int64 class indices, got {}", targets.dtype());
  EMBER_CHECK(log_probs.dim() >= 1, "nll_loss: log_probs must have a class dim, got a 0-d tensor");
  EMBER_CHECK(log_probs.device() == targets.device(), "nll_loss: log_probs are on {} but targets are on {}",
              log_probs.device(), targets.device());
  const Shape row_shape(log_probs.sizes().begin(), log_probs.sizes().end() - 1);
  EMBER_CHECK(targets.sizes() == row_shape,
              "nll_loss: log_probs of shape {} need targets of shape {}, got targets of shape {}",
              shape_str(log_probs.sizes()), shape_str(row_shape), shape_str(targets.sizes()));
  const int64_t classes = log_probs.size(-1);

  check_index_range(targets, classes, ignore_index, {"nll_loss: target", fmt::format("{} classes", classes)});
  // The count for the mean stays a tensor on the targets' device: no read back to the host.
  const Tensor ignored = eq(targets, static_cast<double>(ignore_index));
  const Tensor counted = sum(logical_not(ignored).to(log_probs.dtype()));

  // Ignored rows gather class 0 (any valid index) and are then zeroed, which also zeroes
  // their gradient.
  const Tensor safe_targets = where(ignored, scalar_tensor(0.0, targets.options()), targets);
  const Tensor picked = squeeze(gather(log_probs, -1, unsqueeze(safe_targets, -1)), -1);
  const Tensor losses = masked_fill(neg(picked), ignored, 0.0);
  return apply_reduction(losses, reduction, counted);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (auto cast = autocast::float32_operands(input, target)) return mse_loss((*cast)[0], (*cast)[1], reduction);
  check_same_shape_and_dtype("mse_loss", "input", input, "target", target);
  const Tensor difference = sub(input, target);
  return apply_reduction(mul(difference, difference), reduction, static_cast<double>(input.numel()));
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, Reduction reduction,
                                        const Tensor& pos_weight) {
  if (auto cast = autocast::float32_operands(logits, targets, pos_weight)) {
    return binary_cross_entropy_with_logits((*cast)[0], (*cast)[1], reduction, (*cast)[2]);
  }
  check_same_shape_and_dtype("binary_cross_entropy_with_logits", "logits", logits, "targets", targets);
  const double count = static_cast<double>(logits.numel());
  // log(1 + exp(-|x|)) never overflows: its exp argument is at most 0.
  const Tensor log_term = log(add(exp(neg(abs(logits))), 1.0));
  if (!pos_weight.defined()) {
    return apply_reduction(add(sub(relu(logits), mul(logits, targets)), log_term), reduction, count);
  }
  EMBER_CHECK(pos_weight.dtype() == logits.dtype(),
              "binary_cross_entropy_with_logits: pos_weight has dtype {} but logits have dtype {}",
              pos_weight.dtype(), logits.dtype());
  EMBER_CHECK(pos_weight.device() == logits.device(),
              "binary_cross_entropy_with_logits: pos_weight is on {} but logits are on {}", pos_weight.device(),
              logits.device());
  EMBER_CHECK(is_broadcastable_to(pos_weight.sizes(), logits.sizes()),
              "binary_cross_entropy_with_logits: pos_weight of shape {} cannot be broadcast to the logits' shape {}",
              shape_str(pos_weight.sizes()), shape_str(logits.sizes()));
  // -log sigmoid(x) = log(1 + exp(-|x|)) + max(-x, 0); the positive term is weighted.
  const Tensor log_weight = add(mul(sub(pos_weight, 1.0), targets), 1.0);
  const Tensor negative_term = mul(1.0 - targets, logits);
  return apply_reduction(add(negative_term, mul(log_weight, add(log_term, relu(neg(logits))))), reduction, count);
}

}  // namespace ember::nn
