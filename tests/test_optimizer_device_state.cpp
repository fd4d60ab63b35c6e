// The optimizers' learning rate and step counts as tensors on the parameters' device
// (core/ops/optimizer_steps.h), checked on the CPU: the step kernels read them when they run,
// so the same call, repeated with the same arguments as a replayed CUDA graph repeats it,
// follows a changed learning rate and counts its steps; set_lr and load_state_dict keep the
// learning-rate tensor equal to the group's rate.
#include <cmath>

#include "core/ops/optimizer_steps.h"
#include "helpers.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"

using namespace ember;
using namespace ember::testing;

namespace {

Tensor parameter_with_grad(std::vector<double> values, std::vector<double> grad) {
  const Shape shape{static_cast<int64_t>(values.size())};
  Tensor p = tensor<double>(values, shape);
  p.requires_grad_(true);
  p.mutable_grad() = tensor<double>(grad, shape);
  return p;
}

}  // namespace

TEST_CASE("adam_step reads lr and the step counts when it runs, and advances the counts") {
  const Tensor param = parameter_with_grad({1.0, -2.0}, {0.5, 0.25}).detach();
  const Tensor grad = tensor<double>({0.5, 0.25}, {2});
  const Tensor exp_avg = zeros({2}, kFloat64), exp_avg_sq = zeros({2}, kFloat64);
  const Tensor step = zeros({}, kFloat64);
  Tensor lr = scalar_tensor(0.1, kFloat64);
  const std::vector<Tensor> params{param}, grads{grad}, exp_avgs{exp_avg}, exp_avg_sqs{exp_avg_sq}, steps{step};
  const AdamStepOptions options{.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0,
                                .decoupled_weight_decay = false};

  // The reference: PyTorch's rule, in doubles, with the rate changed between the two steps.
  std::vector<double> w = {1.0, -2.0}, m = {0, 0}, v = {0, 0};
  const std::vector<double> g = {0.5, 0.25};
  const double rates[2] = {0.1, 0.03};
  for (int t = 1; t <= 2; ++t) {
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
      w[i] -= rates[t - 1] * (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
    }
    // The same call each time; only the memory it reads changed.
    kernels::adam_step[kCPU](params, grads, exp_avgs, exp_avg_sqs, steps, lr, options);
    CHECK(step.item<double>() == t);
    check_close(param, tensor<double>(w, {2}), 1e-14, 1e-13);
    lr.fill_(rates[1]);
  }
}

TEST_CASE("sgd_step reads lr when it runs") {
  const Tensor param = tensor<double>({1.0, 2.0}, {2});
  const std::vector<Tensor> params{param}, grads{tensor<double>({1.0, -1.0}, {2})};
  std::vector<Tensor> buffers(1);
  Tensor lr = scalar_tensor(0.5, kFloat64);
  const SGDStepOptions options{.momentum = 0.0, .dampening = 0.0, .weight_decay = 0.0, .nesterov = false};
  kernels::sgd_step[kCPU](params, grads, buffers, lr, options);
  check_close(param, tensor<double>({0.5, 2.5}, {2}), 0, 0);
  lr.fill_(0.25);
  kernels::sgd_step[kCPU](params, grads, buffers, lr, options);
  check_close(param, tensor<double>({0.25, 2.75}, {2}), 0, 0);
}

TEST_CASE("set_lr after a step reaches the next step's kernel") {
  Tensor w = parameter_with_grad({1.0, 2.0}, {1.0, -1.0});
  nn::SGD optimizer({w}, {.lr = 0.5});
  optimizer.step();  // makes the learning-rate tensor, with 0.5
  optimizer.set_lr(0, 0.125);
  optimizer.step();
  check_close(w.detach(), tensor<double>({1.0 - 0.5 - 0.125, 2.0 + 0.5 + 0.125}, {2}), 0, 0);
}

TEST_CASE("load_state_dict's learning rate reaches the next step's kernel") {
  Tensor w = parameter_with_grad({1.0}, {2.0});
  nn::SGD optimizer({w}, {.lr = 0.5});
  optimizer.step();  // 1 - 0.5 * 2
  Tensor other = parameter_with_grad({0.0}, {1.0});
  nn::SGD saved({other}, {.lr = 0.25});
  optimizer.load_state_dict(saved.state_dict());
  optimizer.step();  // 0 - 0.25 * 2
  CHECK(w.item<double>() == -0.5);
}

TEST_CASE("Adam's step count is a 0-d float64 tensor on the parameter's device, saved and restored") {
  Tensor w = parameter_with_grad({1.0, -1.0}, {0.5, 0.5});
  nn::AdamW optimizer({w}, {.lr = 0.01});
  for (int s = 0; s < 3; ++s) optimizer.step();
  const nn::StateDict state = optimizer.state_dict();
  const Tensor& step = state.at("state.0.step");
  CHECK(step.dim() == 0);
  CHECK(step.dtype() == kFloat64);
  CHECK(step.device() == w.device());
  CHECK(step.item<double>() == 3.0);

  // A restored count goes on from where it was: the fourth step's bias corrections.
  Tensor restored_w = parameter_with_grad({1.0, -1.0}, {0.5, 0.5});
  nn::AdamW restored({restored_w}, {.lr = 0.01});
  restored.load_state_dict(state);
  restored_w.detach().copy_(w.detach());
  optimizer.step();
  restored.step();
  CHECK(restored.state_dict().at("state.0.step").item<double>() == 4.0);
  check_close(restored_w.detach(), w.detach(), 0, 0);
}
