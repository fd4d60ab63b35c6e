// The vectorisable float32 exp, erf, tanh, sigmoid and GELUs of core/cpu/kernels/vector_math.h,
// on every rung of instruction sets this CPU has (each rung's table called directly), against the
// double-precision std:: functions; the GELUs' fused backward and the row kernels of softmax,
// log_softmax, cross_entropy and logsumexp likewise; and the float32 ops built on them.
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "core/cpu/kernel_table.h"
#include "cpu_rungs.h"
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr double kFloatEpsilon = std::numeric_limits<float>::epsilon();  // 2^-23
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Evenly spaced float inputs over [low, high].
std::vector<float> sweep(float low, float high, int count) {
  std::vector<float> values(count);
  for (int i = 0; i < count; ++i) values[i] = low + (high - low) * static_cast<float>(i) / (count - 1);
  return values;
}

// f over xs by `rung`'s kernel.
std::vector<float> apply(cpu::CpuIsa rung, cpu::VectorFunction f, const std::vector<float>& xs) {
  std::vector<float> out(xs.size());
  cpu::kernel_table(rung).map_f32(f, xs.data(), static_cast<int64_t>(xs.size()), out.data());
  return out;
}

// f of one value by `rung`'s kernel.
float apply(cpu::CpuIsa rung, cpu::VectorFunction f, float x) { return apply(rung, f, std::vector<float>{x})[0]; }

std::string rung_name(cpu::CpuIsa rung) { return std::string(cpu::cpu_isa_name(rung)); }

}  // namespace

TEST_CASE("exp_f32 is within about one float epsilon of exp over the whole normal range") {
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
  CAPTURE(rung_name(rung));
  const auto exp_f32 = [rung](float x) { return apply(rung, cpu::VectorFunction::kExp, x); };
  const std::vector<float> xs = sweep(-86.9f, 88.72f, 1000003);
  const std::vector<float> ys = apply(rung, cpu::VectorFunction::kExp, xs);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double expected = std::exp(static_cast<double>(xs[i]));
    worst = std::max(worst, std::abs(ys[i] - expected) / expected);
  }
  MESSAGE(rung_name(rung) << ": exp_f32 max relative error " << worst << " (" << worst / kFloatEpsilon << " epsilons)");
  CHECK(worst < 1.5 * kFloatEpsilon);
  // Special values: exact 0 at -inf and below the normal range, inf above it, NaN through.
  CHECK(exp_f32(-kInf) == 0.0f);
  CHECK(exp_f32(-200.0f) == 0.0f);
  CHECK(exp_f32(0.0f) == 1.0f);
  CHECK(std::isinf(exp_f32(89.0f)));
  CHECK(std::isinf(exp_f32(kInf)));
  CHECK(std::isnan(exp_f32(kNaN)));
  CHECK(exp_f32(-87.5f) == 0.0f);
  CHECK(exp_f32(-1e30f) == 0.0f);
  CHECK(std::isinf(exp_f32(1e30f)));
  CHECK(exp_f32(88.7f) == doctest::Approx(std::exp(static_cast<double>(88.7f))).epsilon(1e-6));
  }
}

TEST_CASE("erf_f32 is within 1e-6 of erf, and relatively accurate near 0") {
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
  CAPTURE(rung_name(rung));
  const auto erf_f32 = [rung](float x) { return apply(rung, cpu::VectorFunction::kErf, x); };
  const std::vector<float> xs = sweep(-8.0f, 8.0f, 1000001);
  const std::vector<float> ys = apply(rung, cpu::VectorFunction::kErf, xs);
  double worst_abs = 0, worst_rel_small = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i];
    const double expected = std::erf(static_cast<double>(x));
    const double error = std::abs(ys[i] - expected);
    worst_abs = std::max(worst_abs, error);
    if (std::abs(x) < 0.5f && x != 0.0f) worst_rel_small = std::max(worst_rel_small, error / std::abs(expected));
  }
  MESSAGE(rung_name(rung) << ": erf_f32 max absolute error " << worst_abs << ", relative below |x| 0.5: " << worst_rel_small);
  CHECK(worst_abs < 1e-6);
  CHECK(worst_rel_small < 4 * kFloatEpsilon);
  CHECK(erf_f32(1e-30f) == doctest::Approx(1.1283791670955126e-30).epsilon(1e-6));
  CHECK(erf_f32(kInf) == 1.0f);
  CHECK(erf_f32(-kInf) == -1.0f);
  CHECK(std::isnan(erf_f32(kNaN)));
  }
}

TEST_CASE("gelu_f32 is within 3e-7 of x Phi(x) times max(1, |x|)") {
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
  CAPTURE(rung_name(rung));
  const auto gelu_f32 = [rung](float x) { return apply(rung, cpu::VectorFunction::kGelu, x); };
  const std::vector<float> xs = sweep(-10.0f, 10.0f, 1000001);
  const std::vector<float> ys = apply(rung, cpu::VectorFunction::kGelu, xs);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    const double expected = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    worst = std::max(worst, std::abs(ys[i] - expected) / std::max(1.0, std::abs(v)));
  }
  MESSAGE(rung_name(rung) << ": gelu_f32 max error (scaled by max(1, |x|)) " << worst);
  CHECK(worst < 3e-7);
  CHECK(gelu_f32(0.0f) == 0.0f);
  CHECK(std::isinf(gelu_f32(kInf)));
  CHECK(std::isnan(gelu_f32(kNaN)));
  }
}

TEST_CASE("tanh_f32 and sigmoid_f32 are within a few float epsilons") {
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
  CAPTURE(rung_name(rung));
  const auto tanh_f32 = [rung](float x) { return apply(rung, cpu::VectorFunction::kTanh, x); };
  const auto sigmoid_f32 = [rung](float x) { return apply(rung, cpu::VectorFunction::kSigmoid, x); };
  const std::vector<float> xs = sweep(-20.0f, 20.0f, 1000001);
  const std::vector<float> tanhs = apply(rung, cpu::VectorFunction::kTanh, xs);
  const std::vector<float> sigmoids = apply(rung, cpu::VectorFunction::kSigmoid, xs);
  double worst_tanh = 0, worst_sigmoid = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double t = std::tanh(static_cast<double>(xs[i]));
    if (t != 0) worst_tanh = std::max(worst_tanh, std::abs(tanhs[i] - t) / std::abs(t));
    const double s = 1 / (1 + std::exp(-static_cast<double>(xs[i])));
    worst_sigmoid = std::max(worst_sigmoid, std::abs(sigmoids[i] - s) / s);
  }
  MESSAGE(rung_name(rung) << ": tanh_f32 max relative error " << worst_tanh << ", sigmoid_f32 " << worst_sigmoid);
  CHECK(worst_tanh < 4 * kFloatEpsilon);
  CHECK(worst_sigmoid < 4 * kFloatEpsilon);
  CHECK(tanh_f32(100.0f) == 1.0f);
  CHECK(tanh_f32(-kInf) == -1.0f);
  CHECK(sigmoid_f32(-200.0f) == 0.0f);
  CHECK(sigmoid_f32(200.0f) == 1.0f);
  }
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

TEST_CASE("every rung's GELU backward kernels match the float64 derivatives") {
  const std::vector<float> xs = sweep(-9.0f, 9.0f, 100003);
  std::vector<float> grads(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) grads[i] = 0.5f + static_cast<float>(i % 7) * 0.25f;
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
    CAPTURE(rung_name(rung));
    for (const bool tanh_form : {false, true}) {
      CAPTURE(tanh_form);
      std::vector<float> out(xs.size());
      cpu::kernel_table(rung).activation_backward_f32(tanh_form ? cpu::VectorFunction::kGeluTanh : cpu::VectorFunction::kGelu,
                                                      grads.data(), xs.data(), static_cast<int64_t>(xs.size()), out.data());
      double worst = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const double v = xs[i];
        double derivative;
        if (tanh_form) {
          const double c = std::sqrt(2.0 / M_PI), t = std::tanh(c * (v + 0.044715 * v * v * v));
          derivative = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v);
        } else {
          derivative = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
        }
        worst = std::max(worst, std::abs(out[i] - grads[i] * derivative) / std::max(1.0, std::abs(grads[i] * derivative)));
      }
      const std::string form = tanh_form ? "gelu tanh" : "gelu";
      MESSAGE(rung_name(rung) << ": " << form << " backward max error " << worst);
      CHECK(worst < 2e-6);
    }
  }
}

TEST_CASE("every rung's softmax, log_softmax and log-sum-exp rows match float64 definitions") {
  // Rows of lengths that cross the kernels' lane blocks (16 and 64 floats), and a masked entry.
  for (const int64_t n : {1, 7, 16, 63, 64, 65, 200, 1027}) {
    std::vector<double> row64(n);
    for (int64_t i = 0; i < n; ++i) row64[i] = std::sin(0.7 * static_cast<double>(i) + 0.3 * n) * 6.0;
    if (n > 2) row64[1] = -std::numeric_limits<double>::infinity();
    std::vector<float> row(row64.begin(), row64.end());
    double max = -std::numeric_limits<double>::infinity(), finite_sum = 0;
    for (int64_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(row[i]));
    double exp_sum = 0;
    for (int64_t i = 0; i < n; ++i) exp_sum += std::exp(static_cast<double>(row[i]) - max);
    for (int64_t i = 0; i < n; ++i) finite_sum += std::isinf(row[i]) ? 0.0 : static_cast<double>(row[i]);
    for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
      CAPTURE(rung_name(rung));
      CAPTURE(n);
      const cpu::RowKernels<float>& rows = cpu::kernel_table(rung).rows_f32;
      std::vector<float> soft(n), log_soft(n);
      rows.softmax_row(soft.data(), row.data(), nullptr, nullptr, n, false);
      rows.softmax_row(log_soft.data(), row.data(), nullptr, nullptr, n, true);
      for (int64_t i = 0; i < n; ++i) {
        const double expected = std::exp(static_cast<double>(row[i]) - max) / exp_sum;
        CHECK(soft[i] == doctest::Approx(expected).epsilon(8 * kFloatEpsilon).scale(1e-30));
        if (!std::isinf(row[i])) {
          CHECK(log_soft[i] == doctest::Approx(std::log(expected)).epsilon(8 * kFloatEpsilon).scale(1));
        } else {
          CHECK(std::isinf(log_soft[i]));
        }
      }
      // In place, as attention calls it.
      std::vector<float> in_place = row;
      rows.softmax_row(in_place.data(), in_place.data(), nullptr, nullptr, n, false);
      CHECK(in_place == soft);
      if (n > 2) continue;  // the -inf entry would make the sum infinite
      const cpu::LogSumExp<float> statistics = rows.log_sum_exp_row(row.data(), n, true, nullptr, 4);
      CHECK(statistics.max == static_cast<float>(max));
      CHECK(statistics.log_sum == doctest::Approx(std::log(exp_sum)).epsilon(8 * kFloatEpsilon).scale(1));
      CHECK(statistics.sum == doctest::Approx(finite_sum).epsilon(1e-5).scale(1));
    }
  }
}

TEST_CASE("every rung's cross-entropy and logsumexp row kernels match float64 definitions") {
  const int64_t n = 1000;
  std::vector<float> row(n);
  for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(std::cos(0.37 * static_cast<double>(i)) * 9.0);
  double max = -1e300, sum = 0, exp_sum = 0;
  for (float v : row) max = std::max(max, static_cast<double>(v)), sum += v;
  for (float v : row) exp_sum += std::exp(static_cast<double>(v) - max);
  const double log_sum = std::log(exp_sum), uniform = 0.1 / n, scale = 0.25;
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
    CAPTURE(rung_name(rung));
    const cpu::RowKernels<float>& rows = cpu::kernel_table(rung).rows_f32;
    const cpu::LogSumExp<float> statistics = rows.log_sum_exp_row(row.data(), n, true, nullptr, 4);
    CHECK(statistics.max == static_cast<float>(max));
    CHECK(statistics.log_sum == doctest::Approx(log_sum).epsilon(8 * kFloatEpsilon));
    CHECK(statistics.sum == doctest::Approx(sum).epsilon(1e-5).scale(1));
    std::vector<float> gradient(n);
    rows.softmax_gradient_row(row.data(), n, statistics.max, statistics.log_sum, static_cast<float>(uniform),
                              static_cast<float>(scale), gradient.data());
    for (int64_t i = 0; i < n; ++i) {
      const double p = std::exp(static_cast<double>(row[i]) - max - log_sum);
      // The error is relative to p and the uniform share, which may cancel.
      CHECK(gradient[i] == doctest::Approx((p - uniform) * scale).epsilon(16 * kFloatEpsilon).scale((p + uniform) * scale));
    }
    CHECK(rows.sum_exp_shifted(row.data(), n, static_cast<float>(max)) ==
          doctest::Approx(exp_sum).epsilon(4 * kFloatEpsilon));
    std::vector<float> shifts(n, static_cast<float>(max));
    std::vector<double> totals(n, 1.0);
    rows.accumulate_exp_shifted(row.data(), shifts.data(), n, totals.data());
    for (int64_t i = 0; i < n; ++i) {
      CHECK(totals[i] == doctest::Approx(1.0 + std::exp(static_cast<double>(row[i]) - max)).epsilon(4 * kFloatEpsilon));
    }
    // log_softmax's backward: g - e^y * dot.
    std::vector<float> y(n), g(n, 0.5f), out(n);
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<double>(row[i]) - max - log_sum);
    rows.log_softmax_gradient(g.data(), y.data(), n, 2.0f, nullptr, out.data());
    for (int64_t i = 0; i < n; ++i) {
      CHECK(out[i] == doctest::Approx(0.5 - std::exp(static_cast<double>(y[i])) * 2.0).epsilon(8 * kFloatEpsilon).scale(1));
    }
  }
}

TEST_CASE("every rung converts 16-bit rows exactly and rounds to nearest even") {
  std::vector<float> values;
  for (int i = -3000; i <= 3000; ++i) values.push_back(static_cast<float>(i) * 0.013f + 1e-3f * static_cast<float>(i % 5));
  for (float v : {0.0f, -0.0f, 1e-8f, -6e-5f, 65504.0f, 70000.0f, kInf, -kInf, 3e38f, 1e-40f}) values.push_back(v);
  // Every 4099th float32 bit pattern (NaNs of both signs and every payload class among them,
  // subnormals, bfloat16 ties), and exact ties to even either way.
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) values.push_back(std::bit_cast<float>(uint32_t(bits)));
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f7f8000u, 0x7fc00001u, 0xff812345u, 0x7f800001u}) {
    values.push_back(std::bit_cast<float>(bits));
  }
  const int64_t n = static_cast<int64_t>(values.size());
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
    CAPTURE(rung_name(rung));
    const cpu::KernelTable& table = cpu::kernel_table(rung);
    std::vector<BFloat16> bf(n);
    std::vector<Float16> half(n);
    table.round_to_bf16(values.data(), n, bf.data());
    table.round_to_f16(values.data(), n, half.data());
    std::vector<float> from_bf(n), from_half(n);
    table.widen_bf16(bf.data(), n, from_bf.data());
    table.widen_f16(half.data(), n, from_half.data());
    // One check per kind over the whole row (a million values): the first mismatch is reported.
    int64_t bf_wrong = -1, half_wrong = -1, widened_wrong = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (bf_wrong < 0 && bf[i].bits != BFloat16(values[i]).bits) bf_wrong = i;
      if (half_wrong < 0 && half[i].bits != Float16(values[i]).bits) half_wrong = i;
      const auto same_bits = [](float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); };
      if (widened_wrong < 0 && (!same_bits(from_bf[i], static_cast<float>(BFloat16(values[i]))) ||
                                !same_bits(from_half[i], static_cast<float>(Float16(values[i]))))) {
        widened_wrong = i;
      }
    }
    const auto bits_at = [&](int64_t i) { return std::bit_cast<uint32_t>(values[std::max<int64_t>(i, 0)]); };
    CHECK_MESSAGE(bf_wrong < 0, "bfloat16 rounding of bits " << bits_at(bf_wrong));
    CHECK_MESSAGE(half_wrong < 0, "float16 rounding of bits " << bits_at(half_wrong));
    CHECK_MESSAGE(widened_wrong < 0, "widening of the rounding of bits " << bits_at(widened_wrong));
  }
}
