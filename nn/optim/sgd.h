// SGD with momentum, dampening, Nesterov momentum and L2 weight decay, as torch.optim.SGD.
#pragma once

#include <span>

#include "nn/optim/optimizer.h"

namespace ember::nn {

// The defaults, also the hyper-parameter names a ParamGroup may override ("lr", "momentum",
// "dampening", "nesterov" (0 or 1), "weight_decay").
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0
  double weight_decay = 0.0;
};

// With g the gradient and p the parameter, each step:
//   g = g + weight_decay * p                      (coupled L2 decay)
//   b = g on the first step, else momentum * b + (1 - dampening) * g
//   g = g + momentum * b (nesterov) or b          (when momentum != 0)
//   p = p - lr * g
class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  explicit SGD(std::vector<ParamGroup> groups, SGDOptions defaults = {});

 protected:
  void update_group(size_t group_index, const ParamGroup& group, std::span<ParamState> states) override;
  void check_option(size_t group, const std::string& name, double value) const override;
  void check_group(size_t group) const override;
};

}  // namespace ember::nn
