// The CPU kernels of the fused optimizer steps (core/ops/optimizer_steps.h): Adam/AdamW in one
// pass over each parameter, SGD with ember's ops.
#include "core/ops/optimizer_steps.h"

#include <cmath>

#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/unary.h"
#include "core/parallel.h"

namespace ember {

namespace kernels {
constinit KernelTable<void(std::span<const Tensor> params, std::span<const Tensor> grads,
                           std::span<const Tensor> exp_avg, std::span<const Tensor> exp_avg_sq,
                           std::span<const Tensor> steps, const Tensor& lr, const AdamStepOptions& options)>
    adam_step{"adam_step"};
constinit KernelTable<void(std::span<const Tensor> params, std::span<const Tensor> grads,
                           std::span<Tensor> momentum_buffers, const Tensor& lr, const SGDStepOptions& options)>
    sgd_step{"sgd_step"};
}  // namespace kernels

namespace {

// One parameter's update written with ember's ops: nn/adam.h's formulas as they read, for
// parameters the fused loop below does not take (non-contiguous views).
void adam_update_with_ops(Tensor param, Tensor grad, Tensor exp_avg, Tensor exp_avg_sq, double lr, double step,
                          const AdamStepOptions& options) {
  const double beta1 = options.beta1, beta2 = options.beta2;
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
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamStepOptions& options, double lr, double step) {
  const T beta1 = static_cast<T>(options.beta1), beta2 = static_cast<T>(options.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - options.beta1), one_minus_beta2 = static_cast<T>(1.0 - options.beta2);
  const bool decoupled = options.decoupled_weight_decay;
  const T decay = static_cast<T>(decoupled ? 1.0 - lr * options.weight_decay : 1.0);
  const T l2 = static_cast<T>(decoupled ? 0.0 : options.weight_decay);
  const T sqrt_bias_correction2 = static_cast<T>(std::sqrt(1.0 - std::pow(options.beta2, step)));
  const T step_size = static_cast<T>(lr / (1.0 - std::pow(options.beta1, step)));
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

// A 0-d float64 tensor's value, read in place: the CPU kernels' lr and step counts.
double& value_of(const Tensor& scalar) { return *scalar.data_ptr<double>(); }

// The CPU step, parameter after parameter: the fused loop when every tensor is contiguous
// (the usual case), the ops otherwise.
void adam_step_cpu(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                   std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> steps, const Tensor& lr_tensor,
                   const AdamStepOptions& options) {
  const double lr = value_of(lr_tensor);
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor &param = params[i], &grad = grads[i], &exp_avg = exp_avgs[i], &exp_avg_sq = exp_avg_sqs[i];
    const double step = ++value_of(steps[i]);
    const bool fusable = param.is_contiguous() && grad.is_contiguous() && exp_avg.is_contiguous() &&
                         exp_avg_sq.is_contiguous() && grad.dtype() == param.dtype() &&
                         exp_avg.dtype() == param.dtype() && exp_avg_sq.dtype() == param.dtype();
    if (!fusable) {
      adam_update_with_ops(param, grad, exp_avg, exp_avg_sq, lr, step, options);
      continue;
    }
    visit_floating(param.dtype(), "adam_step", [&]<class T>() {
      adam_update<T>(param.data_ptr<T>(), grad.data_ptr<T>(), exp_avg.data_ptr<T>(), exp_avg_sq.data_ptr<T>(),
                     param.numel(), options, lr, step);
    });
  }
}
EMBER_REGISTER_KERNEL(kernels::adam_step, DeviceType::CPU, adam_step_cpu);

// The CPU step: ember's ops, one parameter after another.
void sgd_step_cpu(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<Tensor> momentum_buffers,
                  const Tensor& lr, const SGDStepOptions& options) {
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor param = params[i];
    Tensor direction = grads[i];
    if (options.weight_decay != 0.0) direction = add(direction, mul(param, options.weight_decay));
    if (options.momentum != 0.0) {
      Tensor& buffer = momentum_buffers[i];
      if (!buffer.defined()) {
        buffer = clone(direction);
      } else {
        buffer.mul_(options.momentum).add_(direction, 1.0 - options.dampening);
      }
      direction = options.nesterov ? add(direction, mul(buffer, options.momentum)) : buffer;
    }
    param.add_(direction, -value_of(lr));
  }
}
EMBER_REGISTER_KERNEL(kernels::sgd_step, DeviceType::CPU, sgd_step_cpu);

}  // namespace
}  // namespace ember
