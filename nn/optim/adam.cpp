// Adam's and AdamW's update and hyper-parameter checks.
#include "nn/optim/adam.h"

#include <cmath>

#include "core/ops/factory.h"
#include "core/ops/optimizer_steps.h"

namespace ember::nn {
namespace {

HyperParameters adam_defaults(const AdamOptions& options) {
  return {{"lr", options.lr},
          {"beta1", options.betas[0]},
          {"beta2", options.betas[1]},
          {"eps", options.eps},
          {"weight_decay", options.weight_decay}};
}

AdamOptions from_adamw(const AdamWOptions& options) {
  return {options.lr, options.betas, options.eps, options.weight_decay};
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<ParamGroup>{{std::move(params), {}}}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults)
    : Adam("Adam", std::move(groups), defaults, /*decoupled_weight_decay=*/false) {}

Adam::Adam(std::string type_name, std::vector<ParamGroup> groups, AdamOptions defaults, bool decoupled_weight_decay)
    : Optimizer(std::move(type_name), std::move(groups), adam_defaults(defaults), {"step", "exp_avg", "exp_avg_sq"}),
      decoupled_weight_decay_(decoupled_weight_decay) {
  check_hyper_parameters();
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(std::vector<ParamGroup>{{std::move(params), {}}}, options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults)
    : Adam("AdamW", std::move(groups), from_adamw(defaults), /*decoupled_weight_decay=*/true) {}

void Adam::check_option(size_t group, const std::string& name, double value) const {
  if (name == "beta1" || name == "beta2") {
    EMBER_CHECK(value >= 0.0 && value < 1.0, "{}: {} must be in [0, 1), got {} (parameter group {})", type_name(),
                name, value, group);
  } else {
    EMBER_CHECK(value >= 0.0 && std::isfinite(value), "{}: {} must be >= 0, got {} (parameter group {})",
                type_name(), name, value, group);
  }
}

void Adam::update_group(size_t group_index, const ParamGroup& group, std::span<ParamState> states) {
  const AdamStepOptions options{group.options.at("beta1"), group.options.at("beta2"), group.options.at("eps"),
                                group.options.at("weight_decay"), decoupled_weight_decay_};
  for (const std::vector<size_t>& on_device : with_grad_by_device(group)) {
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    const Device device = group.params[on_device.front()].device();
    for (const size_t i : on_device) {
      const Tensor& param = group.params[i];
      ParamState& state = states[i];
      if (state.empty()) {
        check_can_create_state(group_index, i, "moment estimates");
        state["step"] = zeros({}, TensorOptions(kFloat64).device(device));
        state["exp_avg"] = zeros_like(param);
        state["exp_avg_sq"] = zeros_like(param);
      }
      params.push_back(param);
      grads.push_back(param.grad());
      exp_avgs.push_back(state["exp_avg"]);
      exp_avg_sqs.push_back(state["exp_avg_sq"]);
      steps.push_back(state["step"]);
    }
    adam_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr_tensor(group_index, device), options);
  }
}

}  // namespace ember::nn
