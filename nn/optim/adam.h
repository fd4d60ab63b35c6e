// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), as
// torch.optim.Adam and torch.optim.AdamW.
#pragma once

#include <array>
#include <span>

#include "nn/optim/optimizer.h"

namespace ember::nn {

// The defaults. A ParamGroup overrides them by the names "lr", "beta1", "beta2", "eps",
// "weight_decay".
struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};  // each in [0, 1)
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// AdamW's defaults differ from Adam's only in the weight decay, as in PyTorch.
struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// With g the gradient, p the parameter and t the parameter's step count (1 on its first
// update), each step:
//   g = g + weight_decay * p                          (Adam: coupled L2 decay)
//   p = p * (1 - lr * weight_decay)                   (AdamW: decoupled decay, instead)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State per parameter: "step" (t, a 0-d float64), "exp_avg" (m), "exp_avg_sq" (v), all on the
// parameter's device from its first update (the step kernel, core/ops/optimizer_steps.h, reads
// and advances t there); Optimizer::to_parameter_devices moves those made before a Module::to.
class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {});

 protected:
  Adam(std::string type_name, std::vector<ParamGroup> groups, AdamOptions defaults, bool decoupled_weight_decay);
  void update_group(size_t group_index, const ParamGroup& group, std::span<ParamState> states) override;
  void check_option(size_t group, const std::string& name, double value) const override;

 private:
  bool decoupled_weight_decay_;
};

class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults = {});
};

}  // namespace ember::nn
