// The bound the training comparisons of the CUDA suites allow a parameter whose gradient is
// rounding noise (tests/noise_gradients.h), checked against ember's own Adam: no sequence of
// gradients moves a parameter further per step than lr * adam_step_bound(t), and the gradients
// of the Cauchy-Schwarz equality case reach it.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "ember.h"
#include "noise_gradients.h"

namespace {

using ember::Tensor;
using ember::testing::adam_step_bound;

// The step Adam takes at each of its updates of one float64 parameter fed `gradients` in turn.
std::vector<double> adam_steps(const std::vector<double>& gradients, double lr) {
  Tensor p = ember::zeros({1}, ember::kFloat64).requires_grad_(true);
  ember::nn::Adam adam({p}, {.lr = lr, .eps = 0.0});
  std::vector<double> steps;
  for (double g : gradients) {
    const double before = p.item<double>();
    p.mutable_grad() = ember::full({1}, g, ember::kFloat64);
    adam.step();
    steps.push_back(p.item<double>() - before);
  }
  return steps;
}

}  // namespace

TEST_CASE("adam_step_bound: 1 on the first step, growing slowly with the step count") {
  CHECK(adam_step_bound(1) == doctest::Approx(1.0).epsilon(1e-15));
  CHECK(adam_step_bound(3) == doctest::Approx(1.0036136).epsilon(1e-7));
  CHECK(adam_step_bound(9) == doctest::Approx(1.0350956).epsilon(1e-7));
  for (int t = 1; t < 50; ++t) CHECK(adam_step_bound(t + 1) > adam_step_bound(t));
  // Without momentum the latest gradient alone is the numerator, and earlier zeros shrink the
  // average of squares it is divided by: sqrt((1 - 0.999^5) / 0.001) = 2.23 at t = 5.
  CHECK(adam_step_bound(5, 0.0, 0.999) == doctest::Approx(std::sqrt((1 - std::pow(0.999, 5)) / 0.001)).epsilon(1e-12));
}

TEST_CASE("the gradients of the equality case move Adam by exactly lr * adam_step_bound(t)") {
  const double lr = 1e-3;
  for (const int t : {1, 2, 3, 9}) {
    INFO("t " << t);
    // g_i proportional to w_i / u_i, i.e. to (beta1 / beta2)^(t - i), tiny as rounding noise is.
    std::vector<double> gradients;
    for (int i = 1; i <= t; ++i) gradients.push_back(1e-12 * std::pow(0.9 / 0.999, t - i));
    const std::vector<double> steps = adam_steps(gradients, lr);
    CHECK(std::abs(steps.back()) == doctest::Approx(lr * adam_step_bound(t)).epsilon(1e-12));
  }
}

TEST_CASE("no run of noise gradients moves Adam further than the bound") {
  ember::manual_seed(7);
  const double lr = 1e-3;
  for (int trial = 0; trial < 200; ++trial) {
    // Signs and sizes at random, over four orders of magnitude.
    const std::vector<double> signs = ember::randn({12}, ember::kFloat64).to_vector<double>();
    const std::vector<double> scales = ember::rand({12}, ember::kFloat64).to_vector<double>();
    std::vector<double> gradients;
    for (size_t i = 0; i < signs.size(); ++i) gradients.push_back(signs[i] * 1e-9 * std::pow(10.0, 4 * scales[i]));
    const std::vector<double> steps = adam_steps(gradients, lr);
    for (size_t t = 0; t < steps.size(); ++t) {
      CHECK(std::abs(steps[t]) <= lr * adam_step_bound(static_cast<int>(t) + 1) * (1 + 1e-12));
    }
  }
}
