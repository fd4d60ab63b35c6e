// The CPU kernels of the fused optimizer steps (core/ops/optimizer_steps.h): Adam/AdamW in one
// pass over each parameter, SGD with ember's ops.
#include "core/ops/optimizer_steps.h"

#include <cmath>

#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/inplace.h"
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

// One parameter's update written with ember's ops: nn/optim/adam.h's formulas as they read, for
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
// arithmetic is the composite form's, in the same order, in the parameter's dtype; for a 16-bit
// parameter (and its 16-bit gradient and moments) in float32, each stored value rounded once.
template <class T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamStepOptions& options, double lr, double step) {
  using C = compute_type<T>;
  const C beta1 = static_cast<C>(options.beta1), beta2 = static_cast<C>(options.beta2);
  const C one_minus_beta1 = static_cast<C>(1.0 - options.beta1), one_minus_beta2 = static_cast<C>(1.0 - options.beta2);
  const bool decoupled = options.decoupled_weight_decay;
  const C decay = static_cast<C>(decoupled ? 1.0 - lr * options.weight_decay : 1.0);
  const C l2 = static_cast<C>(decoupled ? 0.0 : options.weight_decay);
  const C sqrt_bias_correction2 = static_cast<C>(std::sqrt(1.0 - std::pow(options.beta2, step)));
  const C step_size = static_cast<C>(lr / (1.0 - std::pow(options.beta1, step)));
  const C eps = static_cast<C>(options.eps);
  parallel_for(n, 8, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const C grad = C(g[i]) + l2 * C(p[i]);
      const C param = C(p[i]) * decay;
      const C m_i = C(m[i]) * beta1 + one_minus_beta1 * grad;
      const C v_i = C(v[i]) * beta2 + one_minus_beta2 * (grad * grad);
      m[i] = T(m_i);
      v[i] = T(v_i);
      p[i] = T(param - step_size * (m_i / (std::sqrt(v_i) / sqrt_bias_correction2 + eps)));
    }
  });
}

// One SGD update of a 16-bit parameter in one pass, in float32:
//   d = g + weight_decay * p;  b = momentum * b + (1 - dampening) * d (b = d on the first step);
//   p -= lr * (nesterov ? d + momentum * b : b)
// the composite form's formulas, with p and b each rounded once where stored (with the ops,
// every intermediate would be rounded to 16 bits). `buffer` is null without momentum.
template <class T>
void sgd_update(T* p, const T* g, T* buffer, bool first_step, int64_t n, const SGDStepOptions& options, double lr) {
  using C = compute_type<T>;
  const C weight_decay = static_cast<C>(options.weight_decay), momentum = static_cast<C>(options.momentum);
  const C damped = static_cast<C>(1.0 - options.dampening), rate = static_cast<C>(lr);
  const bool nesterov = options.nesterov;
  parallel_for(n, 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const C direction = C(g[i]) + weight_decay * C(p[i]);
      C step = direction;
      if (buffer != nullptr) {
        const C b = first_step ? direction : momentum * C(buffer[i]) + damped * direction;
        buffer[i] = T(b);
        step = nesterov ? direction + momentum * b : b;
      }
      p[i] = T(C(p[i]) - rate * step);
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
    visit_any_floating(param.dtype(), "adam_step", [&]<class T>() {
      adam_update<T>(param.data_ptr<T>(), grad.data_ptr<T>(), exp_avg.data_ptr<T>(), exp_avg_sq.data_ptr<T>(),
                     param.numel(), options, lr, step);
    });
  }
}
EMBER_REGISTER_KERNEL(kernels::adam_step, DeviceType::CPU, adam_step_cpu);

// The fused 16-bit SGD step when param, grad and buffer are contiguous and of one dtype.
bool sgd_16_bit_step(const Tensor& param, const Tensor& grad, Tensor& buffer, double lr,
                     const SGDStepOptions& options) {
  const bool with_momentum = options.momentum != 0.0;
  const bool fusable = is_16_bit_floating_point(param.dtype()) && param.is_contiguous() && grad.is_contiguous() &&
                       grad.dtype() == param.dtype() &&
                       (!with_momentum || !buffer.defined() ||
                        (buffer.is_contiguous() && buffer.dtype() == param.dtype()));
  if (!fusable) return false;
  const bool first_step = with_momentum && !buffer.defined();
  if (first_step) buffer = make_tensor(param.sizes(), param.dtype(), param.device());
  visit_any_floating(param.dtype(), "sgd_step", [&]<class T>() {
    sgd_update<T>(param.data_ptr<T>(), grad.data_ptr<T>(), with_momentum ? buffer.data_ptr<T>() : nullptr,
                  first_step, param.numel(), options, lr);
  });
  return true;
}

// The CPU step: ember's ops, one parameter after another (a fused loop for 16-bit parameters).
void sgd_step_cpu(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<Tensor> momentum_buffers,
                  const Tensor& lr, const SGDStepOptions& options) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (sgd_16_bit_step(params[i], grads[i], momentum_buffers[i], value_of(lr), options)) continue;
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

void adam_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avg,
               std::span<const Tensor> exp_avg_sq, std::span<const Tensor> steps, const Tensor& lr,
               const AdamStepOptions& options) {
  if (params.empty()) return;
  kernels::adam_step[params.front().device()](params, grads, exp_avg, exp_avg_sq, steps, lr, options);
  for (const auto written : {params, exp_avg, exp_avg_sq, steps}) mark_written_in_place(written);
}

void sgd_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<Tensor> momentum_buffers,
              const Tensor& lr, const SGDStepOptions& options) {
  if (params.empty()) return;
  kernels::sgd_step[params.front().device()](params, grads, momentum_buffers, lr, options);
  mark_written_in_place(params);
  mark_written_in_place(momentum_buffers);  // a buffer made by this step has nothing to refuse
}

}  // namespace ember
