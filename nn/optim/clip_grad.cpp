// clip_grad_norm_: the total gradient norm, computed on the gradients' device and applied
// without reading it back, so a training step need not wait for the device.
#include "nn/optim/clip_grad.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/reduce.h"
#include "core/ops/unary.h"

namespace ember::nn {

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  const bool infinity_norm = std::isinf(norm_type) && norm_type > 0;
  EMBER_CHECK(norm_type == 2.0 || infinity_norm, "clip_grad_norm_: norm_type must be 2 or infinity, got {}",
              norm_type);
  EMBER_CHECK(max_norm >= 0.0 && !std::isnan(max_norm), "clip_grad_norm_: max_norm must be >= 0, got {}", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    EMBER_CHECK(p.defined(), "clip_grad_norm_: parameter {} is undefined", grads.size());
    if (p.grad().defined() && p.grad().numel() > 0) grads.push_back(p.grad());
  }
  if (grads.empty()) return scalar_tensor(0.0, kFloat64);
  const Device device = grads.front().device();

  // Each gradient's part (its sum of squares, or its largest magnitude), combined in float64.
  Tensor total;
  for (const Tensor& grad : grads) {
    const Tensor part = (infinity_norm ? max(abs(grad)) : sum(mul(grad, grad))).to(kFloat64).to(device);
    total = !total.defined() ? part : infinity_norm ? maximum(total, part) : add(total, part);
  }
  if (!infinity_norm) total = sqrt(total);

  // min(max_norm / (total + 1e-6), 1): multiplying by exactly 1 leaves gradients unchanged.
  const Tensor scale = clamp(div(scalar_tensor(max_norm, TensorOptions(kFloat64).device(device)), add(total, 1e-6)),
                             std::nullopt, 1.0);
  for (Tensor grad : grads) grad.mul_(scale.to(grad.dtype()).to(grad.device()));
  return total;
}

}  // namespace ember::nn
