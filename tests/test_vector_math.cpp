// The vectorisable float32 exp, erf, tanh and sigmoid of core/cpu/vector_math.h against the
// double-precision std:: functions, and the float32 unary ops that use them.
#include <cmath>
#include <limits>

#include "core/cpu/vector_math.h"
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr double kFloatEpsilon = std::numeric_limits<float>::epsilon();  // 2^-23

// Evenly spaced float inputs over [low, high].
std::vector<float> sweep(float low, float high, int count) {
  std::vector<float> values(count);
  for (int i = 0; i < count; ++i) values[i] = low + (high - low) * static_cast<float>(i) / (count - 1);
  return values;
}

}  // namespace

TEST_CASE("exp_f32 is within about one float epsilon of exp over the whole normal range") {
  double worst = 0;
  for (float x : sweep(-86.9f, 88.72f, 1000003)) {
    const double expected = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(cpu::exp_f32(x) - expected) / expected);
  }
  MESSAGE("exp_f32 max relative error " << worst << " (" << worst / kFloatEpsilon << " epsilons)");
  CHECK(worst < 1.5 * kFloatEpsilon);
  // Special values: exact 0 at -inf and below the normal range, inf above it, NaN through.
  CHECK(cpu::exp_f32(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(cpu::exp_f32(-200.0f) == 0.0f);
  CHECK(cpu::exp_f32(0.0f) == 1.0f);
  CHECK(std::isinf(cpu::exp_f32(89.0f)));
  CHECK(std::isinf(cpu::exp_f32(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(cpu::exp_f32(std::numeric_limits<float>::quiet_NaN())));
  CHECK(cpu::exp_f32(-87.5f) == 0.0f);
  CHECK(cpu::exp_f32(-1e30f) == 0.0f);
  CHECK(std::isinf(cpu::exp_f32(1e30f)));
  CHECK(cpu::exp_f32(88.7f) == doctest::Approx(std::exp(static_cast<double>(88.7f))).epsilon(1e-6));
}

TEST_CASE("erf_f32 is within 1e-6 of erf, and relatively accurate near 0") {
  double worst_abs = 0, worst_rel_small = 0;
  for (float x : sweep(-8.0f, 8.0f, 1000001)) {
    const double expected = std::erf(static_cast<double>(x));
    const double error = std::abs(cpu::erf_f32(x) - expected);
    worst_abs = std::max(worst_abs, error);
    if (std::abs(x) < 0.5f && x != 0.0f) worst_rel_small = std::max(worst_rel_small, error / std::abs(expected));
  }
  MESSAGE("erf_f32 max absolute error " << worst_abs << ", relative below |x| 0.5: " << worst_rel_small);
  CHECK(worst_abs < 1e-6);
  CHECK(worst_rel_small < 4 * kFloatEpsilon);
  CHECK(cpu::erf_f32(1e-30f) == doctest::Approx(1.1283791670955126e-30).epsilon(1e-6));
  CHECK(cpu::erf_f32(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(cpu::erf_f32(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(std::isnan(cpu::erf_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("gelu_f32 is within 3e-7 of x Phi(x) times max(1, |x|)") {
  double worst = 0;
  for (float x : sweep(-10.0f, 10.0f, 1000001)) {
    const double v = x;
    const double expected = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    worst = std::max(worst, std::abs(cpu::gelu_f32(x) - expected) / std::max(1.0, std::abs(v)));
  }
  MESSAGE("gelu_f32 max error (scaled by max(1, |x|)) " << worst);
  CHECK(worst < 3e-7);
  CHECK(cpu::gelu_f32(0.0f) == 0.0f);
  CHECK(std::isinf(cpu::gelu_f32(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(cpu::gelu_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("tanh_f32 and sigmoid_f32 are within a few float epsilons") {
  double worst_tanh = 0, worst_sigmoid = 0;
  for (float x : sweep(-20.0f, 20.0f, 1000001)) {
    const double t = std::tanh(static_cast<double>(x));
    if (t != 0) worst_tanh = std::max(worst_tanh, std::abs(cpu::tanh_f32(x) - t) / std::abs(t));
    const double s = 1 / (1 + std::exp(-static_cast<double>(x)));
    worst_sigmoid = std::max(worst_sigmoid, std::abs(cpu::sigmoid_f32(x) - s) / s);
  }
  MESSAGE("tanh_f32 max relative error " << worst_tanh << ", sigmoid_f32 " << worst_sigmoid);
  CHECK(worst_tanh < 4 * kFloatEpsilon);
  CHECK(worst_sigmoid < 4 * kFloatEpsilon);
  CHECK(cpu::tanh_f32(100.0f) == 1.0f);
  CHECK(cpu::tanh_f32(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(cpu::sigmoid_f32(-200.0f) == 0.0f);
  CHECK(cpu::sigmoid_f32(200.0f) == 1.0f);
}

TEST_CASE("float32 unary ops built on them agree with float64") {
  const Tensor x32 = mul(randn({4096}), 4.0);
  const Tensor x64 = x32.to(kFloat64);  // the very same inputs
  check_close(exp(x32), exp(x64), 1e-30, 4 * kFloatEpsilon);
  check_close(erf(x32), erf(x64), 1e-6, 0.0);
  check_close(tanh(x32), tanh(x64), 1e-30, 4 * kFloatEpsilon);
  check_close(sigmoid(x32), sigmoid(x64), 1e-30, 4 * kFloatEpsilon);
  check_close(gelu(x32), gelu(x64), 5e-6, 4 * kFloatEpsilon);
  check_close(gelu(x32, GeluApproximation::Tanh), gelu(x64, GeluApproximation::Tanh), 5e-6, 4 * kFloatEpsilon);
}
