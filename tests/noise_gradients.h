// Parameters whose gradient is rounding noise, and how far Adam can carry two copies of one
// apart: what a comparison of two training runs (CPU against CUDA, a replayed graph against op
// by op) may allow such a parameter, derived here once for the suites that compare them.
#pragma once

#include <cmath>
#include <string>
#include <string_view>

namespace ember::testing {

// A bias on the keys adds q . b to every score of a query's row, and softmax cancels a shift of
// a whole row, so the loss does not depend on k_proj.bias. Its gradient, each query times the
// sum of its row of score gradients (zero: softmax's backward subtracts the row's weighted
// mean), is zero up to rounding: measured on the CPU, about 5e-9 of the norm of the other
// gradients of its attention block in float32, 1e-17 in float64. Two such roundings, from two
// devices or two summation orders, compared relatively differ by about 100%.
inline constexpr std::string_view kSoftmaxInvariant = "k_proj.bias";
inline bool softmax_invariant(const std::string& name) { return name.ends_with(kSoftmaxInvariant); }

// The largest |m^_t| / sqrt(v^_t) Adam can reach at its step t, over every sequence of
// gradients g_1..g_t (eps 0; eps only makes the step smaller). m_t = sum_i w_i g_i and v_t =
// sum_i u_i g_i^2 with w_i = (1 - beta1) beta1^(t-i), u_i = (1 - beta2) beta2^(t-i), so by
// Cauchy-Schwarz |m_t| <= sqrt(sum_i w_i^2 / u_i) sqrt(v_t), with equality when g_i is
// proportional to w_i / u_i. With the bias corrections, m^ = m / (1 - beta1^t) and v^ = v / (1 -
// beta2^t). For betas 0.9 and 0.999: 1 at t = 1, 1.0036 at t = 3, 1.035 at t = 9. A gradient of
// pure rounding noise therefore moves a parameter by up to lr times this per step, in a
// direction the noise picks, however small the noise is.
inline double adam_step_bound(int t, double beta1 = 0.9, double beta2 = 0.999) {
  double sum = 0;
  for (int age = 0; age < t; ++age) {  // age = t - i
    const double w = (1 - beta1) * std::pow(beta1, age), u = (1 - beta2) * std::pow(beta2, age);
    sum += w * w / u;
  }
  return std::sqrt(sum) * std::sqrt(1 - std::pow(beta2, t)) / (1 - std::pow(beta1, t));
}

}  // namespace ember::testing
