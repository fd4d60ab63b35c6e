// Adam's and AdamW's update and hyper-parameter checks.
#include "nn/adam.h"

#include <cmath>

#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/unary.h"
#include "core/parallel.h"

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

// One parameter's update written with ember's ops: the formulas above as they read, for
// parameters the fused loop below does not take (non-contiguous views).
void adam_update_with_ops(Tensor param, Tensor grad, Tensor exp_avg, Tensor exp_avg_sq, double step,
                          const AdamStepOptions& options) {
  const double lr = options.lr, beta1 = options.beta1, beta2 = options.beta2;
  if (options.weight_decay != 0.0) {
    if (options.decoupled_weight_decay) {
      param.mul_(1.0 - lr * options.weight_decay);
    } else {
      grad = add(grad, mul(param, options.weight_decay));
    }
  }
  exp_avg.mul_(beta1).add_(grad, 1.0 - beta1);
  exp_avg_sq.mul_(beta2).add_(mul(grad, grad), 1.0 - beta2);
  const double bias_correction1 = 1.0 - std::pow(beta1, step);
  const double bias_correction2 = 1.0 - std::pow(beta2, step);
  const Tensor denominator = add(div(sqrt(exp_avg_sq), std::sqrt(bias_correction2)), options.eps);
  param.add_(div(exp_avg, denominator), -lr / bias_correction1);
}

// One parameter's update in one pass: reads p, g, m and v once and writes p, m and v, where the
// same formulas written with tensor ops make about ten passes and four temporaries. The
// arithmetic is the composite form's, in the same order, in the parameter's dtype.
template <class T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamStepOptions& options, double step) {
  const T beta1 = static_cast<T>(options.beta1), beta2 = static_cast<T>(options.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - options.beta1), one_minus_beta2 = static_cast<T>(1.0 - options.beta2);
  const bool decoupled = options.decoupled_weight_decay;
  const T decay = static_cast<T>(decoupled ? 1.0 - options.lr * options.weight_decay : 1.0);
  const T l2 = static_cast<T>(decoupled ? 0.0 : options.weight_decay);
  const T sqrt_bias_correction2 = static_cast<T>(std::sqrt(1.0 - std::pow(options.beta2, step)));
  const T step_size = static_cast<T>(options.lr / (1.0 - std::pow(options.beta1, step)));
  const T eps = static_cast<T>(options.eps);
  parallel_for(n, 8, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const T grad = g[i] + l2 * p[i];
      const T param = p[i] * decay;
      const T m_i = m[i] * beta1 + one_minus_beta1 * grad;
      const T v_i = v[i] * beta2 + one_minus_beta2 * (grad * grad);
      m[i] = m_i;
      v[i] = v_i;
      p[i] = param - step_size * (m_i / (std::sqrt(v_i) / sqrt_bias_correction2 + eps));
    }
  });
}

// The CPU step, parameter after parameter: the fused loop when every tensor is contiguous
// (the usual case), the ops otherwise.
void adam_step_cpu(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                   std::span<const Tensor> exp_avg_sqs, std::span<const double> steps,
                   const AdamStepOptions& options) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor &param = params[i], &grad = grads[i], &exp_avg = exp_avgs[i], &exp_avg_sq = exp_avg_sqs[i];
    const bool fusable = param.is_contiguous() && grad.is_contiguous() && exp_avg.is_contiguous() &&
                         exp_avg_sq.is_contiguous() && grad.dtype() == param.dtype() &&
                         exp_avg.dtype() == param.dtype() && exp_avg_sq.dtype() == param.dtype();
    if (!fusable) {
      adam_update_with_ops(param, grad, exp_avg, exp_avg_sq, steps[i], options);
      continue;
    }
    visit_floating(param.dtype(), "adam_step", [&]<class T>() {
      adam_update<T>(param.data_ptr<T>(), grad.data_ptr<T>(), exp_avg.data_ptr<T>(), exp_avg_sq.data_ptr<T>(),
                     param.numel(), options, steps[i]);
    });
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
