// Adam's and AdamW's update and hyper-parameter checks.
#include "nn/adam.h"

#include <cmath>

#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/unary.h"

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

namespace kernels {
constinit KernelTable<void(std::span<const Tensor> params, std::span<const Tensor> grads,
                           std::span<const Tensor> exp_avg, std::span<const Tensor> exp_avg_sq,
                           std::span<const double> steps, const AdamStepOptions& options)>
    adam_step{"adam_step"};
}  // namespace kernels

namespace {

// The CPU step: ember's ops, one parameter after another.
void adam_step_cpu(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                   std::span<const Tensor> exp_avg_sqs, std::span<const double> steps,
                   const AdamStepOptions& options) {
  const double lr = options.lr, beta1 = options.beta1, beta2 = options.beta2;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor param = params[i];
    Tensor grad = grads[i];
    if (options.weight_decay != 0.0) {
      if (options.decoupled_weight_decay) {
        param.mul_(1.0 - lr * options.weight_decay);
      } else {
        grad = add(grad, mul(param, options.weight_decay));
      }
    }
    Tensor exp_avg = exp_avgs[i];
    Tensor exp_avg_sq = exp_avg_sqs[i];
    exp_avg.mul_(beta1).add_(grad, 1.0 - beta1);
    exp_avg_sq.mul_(beta2).add_(mul(grad, grad), 1.0 - beta2);

    const double bias_correction1 = 1.0 - std::pow(beta1, steps[i]);
    const double bias_correction2 = 1.0 - std::pow(beta2, steps[i]);
    const Tensor denominator = add(div(sqrt(exp_avg_sq), std::sqrt(bias_correction2)), options.eps);
    param.add_(div(exp_avg, denominator), -lr / bias_correction1);
  }
}
EMBER_REGISTER_KERNEL(kernels::adam_step, DeviceType::CPU, adam_step_cpu);

}  // namespace

void Adam::update_group(const ParamGroup& group, std::span<ParamState> states) {
  const AdamStepOptions options{group.options.at("lr"),  group.options.at("beta1"),
                                group.options.at("beta2"), group.options.at("eps"),
                                group.options.at("weight_decay"), decoupled_weight_decay_};
  for (const std::vector<size_t>& on_device : with_grad_by_device(group)) {
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs;
    std::vector<double> steps;
    for (const size_t i : on_device) {
      const Tensor& param = group.params[i];
      ParamState& state = states[i];
      if (state.empty()) {
        state["step"] = scalar_tensor(0.0, kFloat64);
        state["exp_avg"] = zeros_like(param);
        state["exp_avg_sq"] = zeros_like(param);
      }
      // The count lives on the host, so the bias corrections are plain doubles.
      Tensor& step_count = state["step"];
      const double step = step_count.item<double>() + 1.0;
      step_count.fill_(step);
      params.push_back(param);
      grads.push_back(param.grad());
      exp_avgs.push_back(state["exp_avg"]);
      exp_avg_sqs.push_back(state["exp_avg_sq"]);
      steps.push_back(step);
    }
    kernels::adam_step[params.front().device()](params, grads, exp_avgs, exp_avg_sqs, steps, options);
  }
}

}  // namespace ember::nn
