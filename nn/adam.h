// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), as
// torch.optim.Adam and torch.optim.AdamW.
#pragma once

#include <array>
#include <span>

#include "core/dispatch.h"
#include "nn/optimizer.h"

namespace ember::nn {

// The hyper-parameters of one fused Adam step over a list of parameters.
struct AdamStepOptions {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;  // AdamW
};

namespace kernels {
// One Adam/AdamW update (the formulas below) of every params[i] from grads[i], updating
// exp_avg[i] and exp_avg_sq[i] in place; steps[i] is the parameter's step count t, already
// advanced. All tensors sit on one device; each grad, exp_avg and exp_avg_sq has its
// parameter's shape and dtype. The CPU entry runs ember's ops parameter by parameter; a GPU
// entry may update every parameter in a few fused launches.
extern KernelTable<void(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avg,
                        std::span<const Tensor> exp_avg_sq, std::span<const double> steps,
                        const AdamStepOptions& options)>
    adam_step;
}  // namespace kernels

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
// State per parameter: "step" (0-d float64 on the CPU), "exp_avg" (m), "exp_avg_sq" (v).
// The moments are created on the parameter's device at its first update; Optimizer::
// to_parameter_devices moves those made before a Module::to.
class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {});

 protected:
  Adam(std::string type_name, std::vector<ParamGroup> groups, AdamOptions defaults, bool decoupled_weight_decay);
  void update_group(const ParamGroup& group, std::span<ParamState> states) override;
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
