// ember's core demo: a small multilayer perceptron learns y = sin(x) on [-pi, pi] with
// nothing but tensors, autograd and a hand-written Adam step. The loss is printed as it falls.
//
//   ./build/examples/fit_function [--steps N] [--seed S]
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/run_main.h"
#include "ember.h"

using namespace ember;

namespace {

// A weight initialised like PyTorch's Linear: uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)].
Tensor make_parameter(const Shape& shape, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  Tensor p = sub(mul(rand(shape), 2 * bound), bound).detach();
  return p.requires_grad_();
}

struct Adam {
  std::vector<Tensor> parameters, first_moment, second_moment;
  double learning_rate = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int step_count = 0;

  explicit Adam(std::vector<Tensor> params) : parameters(std::move(params)) {
    for (const Tensor& p : parameters) {
      first_moment.push_back(zeros_like(p));
      second_moment.push_back(zeros_like(p));
    }
  }

  void step() {
    NoGradGuard no_grad;  // the update itself is not part of the model
    ++step_count;
    const double correction1 = 1 - std::pow(beta1, step_count), correction2 = 1 - std::pow(beta2, step_count);
    for (size_t i = 0; i < parameters.size(); ++i) {
      const Tensor& grad = parameters[i].grad();
      first_moment[i].mul_(beta1).add_(grad, 1 - beta1);
      second_moment[i].mul_(beta2).add_(mul(grad, grad), 1 - beta2);
      const Tensor denominator = add(sqrt(div(second_moment[i], correction2)), eps);
      parameters[i].add_(div(first_moment[i], denominator), -learning_rate / correction1);
    }
  }

  void zero_grad() {
    for (Tensor& p : parameters) p.mutable_grad() = Tensor();
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ember's core demo: an MLP learns sin(x) with tensors, autograd and a hand-written Adam"};
  int steps = 2000;
  uint64_t seed = 0;
  app.add_option("--steps", steps, "training steps")->check(examples::above(0))->capture_default_str();
  app.add_option("--seed", seed, "random seed")->check(examples::at_least(0))->capture_default_str();

  return examples::run_main(app, argc, argv, [&] {
    manual_seed(seed);

    // 256 points on [-pi, pi] as a column: x [256, 1], target sin(x) [256, 1].
    const Tensor x = arange(-std::numbers::pi, std::numbers::pi, 2 * std::numbers::pi / 256).reshape({-1, 1});
    const Tensor target = sin(x);
    fmt::print("data: x {} -> sin(x) {}\n", shape_str(x.sizes()), shape_str(target.sizes()));

    // 1 -> 32 -> 32 -> 1 with tanh between the layers.
    const int64_t hidden = 32;
    Tensor w1 = make_parameter({hidden, 1}, 1), b1 = make_parameter({hidden}, 1);
    Tensor w2 = make_parameter({hidden, hidden}, hidden), b2 = make_parameter({hidden}, hidden);
    Tensor w3 = make_parameter({1, hidden}, hidden), b3 = make_parameter({1}, hidden);
    Adam optimizer({w1, b1, w2, b2, w3, b3});
    fmt::print("model: Linear(1, {0}) tanh Linear({0}, {0}) tanh Linear({0}, 1), {1} parameters\n", hidden,
               hidden * 2 + hidden * hidden + hidden + hidden + 1);

    double loss_value = 0;
    for (int step = 1; step <= steps; ++step) {
      const Tensor h1 = tanh(linear(x, w1, b1));
      const Tensor h2 = tanh(linear(h1, w2, b2));
      const Tensor prediction = linear(h2, w3, b3);
      const Tensor loss = mean(pow(sub(prediction, target), 2.0));  // mean squared error

      optimizer.zero_grad();
      loss.backward();
      optimizer.step();

      loss_value = loss.item();
      if (step == 1 || step % (steps / 10 > 0 ? steps / 10 : 1) == 0) {
        fmt::print("step {:5d}  loss {:.6f}\n", step, loss_value);
      }
    }

    NoGradGuard no_grad;
    const Tensor probe = tensor({-2.0f, -1.0f, 0.0f, 1.0f, 2.0f}, {5, 1});
    const Tensor fitted = linear(tanh(linear(tanh(linear(probe, w1, b1)), w2, b2)), w3, b3);
    fmt::print("\n     x   sin(x)   model\n");
    for (int i = 0; i < 5; ++i) {
      const double xi = probe.at<float>(i, 0);
      fmt::print("{:6.2f}  {:7.4f}  {:7.4f}\n", xi, std::sin(xi), fitted.at<float>(i, 0));
    }
    return loss_value < 1e-2 ? 0 : 1;
  });
}
