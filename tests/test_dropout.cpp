// dropout: the documented Philox mask, statistics, scaling, reproducibility, eval mode,
// gradients, errors.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("dropout zeroes a fraction p and scales the survivors by 1/(1-p)") {
  for (double p : {0.1, 0.3, 0.5, 0.9}) {
    const Tensor y = dropout(ones({100000}), p);
    const std::vector<float> values = y.to_vector<float>();
    int64_t zeros_seen = 0;
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    bool survivors_scaled = true;
    for (float v : values) {
      if (v == 0.0f) ++zeros_seen;
      else survivors_scaled = survivors_scaled && v == scale;
    }
    CAPTURE(p);
    CHECK(survivors_scaled);
    CHECK(std::abs(static_cast<double>(zeros_seen) / 100000.0 - p) < 0.01);
  }
}

TEST_CASE("dropout's mask is the documented Philox mapping") {
  // The CPU kernel draws its counters many at a time in vector lanes (core/cpu/kernels/philox_lanes.h);
  // each must equal the scalar philox4x32, here including counters whose low 32 bits wrap
  // around within a draw and keys with high bits set.
  const std::vector<PhiloxState> starts{{7, 0}, {~uint64_t{0}, 0xFFFFFF00u}, {0x0123456789ABCDEFu, (1ull << 33) - 77}};
  for (const PhiloxState& start : starts) {
    Generator::global().set_state(start);
    const PhiloxState state = Generator::global().state();
    const double p = 0.4;
    const Tensor y = dropout(ones({4001}, kFloat64), p);
    const std::vector<double> values = y.to_vector<double>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < 4001; ++i) {
      const bool kept = uniform_float(random_word(state, static_cast<uint64_t>(i))) >= static_cast<float>(p);
      wrong += values[i] != (kept ? 1.0 / (1.0 - p) : 0.0);
    }
    CHECK_MESSAGE(wrong == 0, "seed " << state.seed << ", offset " << state.offset);
    // The draw reserved ceil(4001 / 4) counters.
    CHECK(Generator::global().state().offset == state.offset + 1001);
  }
}

TEST_CASE("dropout's mask and its bits for the backward, past one thread's share and in every dtype") {
  // 100,003 elements run on OpenMP's threads in blocks of 256 (the CPU keeps the mask as bits, a
  // 32-bit word per 32 elements), with a last, partial block; p near 0, 1/2 and 1.
  for (const double p : {0.01, 0.5, 0.97}) {
    for (const DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
      CAPTURE(p);
      CAPTURE(dtype_name(dtype));
      manual_seed(77);
      const PhiloxState state = Generator::global().state();
      const Tensor x = ones({100003}, dtype).requires_grad_();
      const Tensor y = dropout(x, p);
      const std::vector<float> values = y.to(kFloat32).to_vector<float>();
      // 16-bit results are the float32 ones rounded once: within half a unit in the last place.
      const double scale = 1.0 / (1.0 - p);
      const double tolerance = dtype == kBFloat16 ? 0x1p-8 : dtype == kFloat16 ? 0x1p-11 : 1e-6;
      int64_t wrong = 0;
      std::vector<double> kept(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        kept[i] = uniform_float(random_word(state, i)) >= static_cast<float>(p) ? 1.0 : 0.0;
        wrong += std::fabs(values[i] - kept[i] * scale) > tolerance * scale;
      }
      CHECK(wrong == 0);
      // The backward reads the bits: the gradient of sum(3 y) is 3 scale where kept, else 0.
      sum(mul(y, 3.0)).backward();
      const std::vector<float> grad = x.grad().to(kFloat32).to_vector<float>();
      int64_t wrong_grad = 0;
      for (size_t i = 0; i < grad.size(); ++i) {
        wrong_grad += std::fabs(grad[i] - 3.0 * kept[i] * scale) > tolerance * 3.0 * scale;
      }
      CHECK(wrong_grad == 0);
    }
  }
}

TEST_CASE("Philox 4x32-10 gives the published known answer") {
  // Salmon et al.'s test vector for counter 0 and key 0.
  CHECK(philox4x32(0, 0) == std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
}

TEST_CASE("dropout is reproducible under manual_seed and differs between draws") {
  const Tensor x = randn({3, 50});
  manual_seed(123);
  const Tensor a = dropout(x, 0.5);
  const Tensor b = dropout(x, 0.5);
  manual_seed(123);
  const Tensor c = dropout(x, 0.5);
  check_close(a, c, 0.0, 0.0);
  CHECK(a.to_vector<float>() != b.to_vector<float>());
}

TEST_CASE("dropout in eval mode, with p = 0 and with p = 1") {
  const Tensor x = randn({4, 5}).requires_grad_();
  CHECK(dropout(x, 0.5, /*train=*/false).impl() == x.impl());
  CHECK(dropout(x, 0.0).impl() == x.impl());
  const Tensor all_dropped = dropout(x, 1.0);
  check_close(all_dropped, zeros({4, 5}), 0.0, 0.0);
  sum(all_dropped).backward();
  check_close(x.grad(), zeros({4, 5}), 0.0, 0.0);
}

TEST_CASE("dropout's backward applies the forward's mask") {
  const Tensor x = ones({5, 40}, kFloat64).requires_grad_();
  const Tensor y = dropout(x, 0.25);
  const Tensor upstream = randn({5, 40}, kFloat64);
  sum(mul(y, upstream)).backward();
  check_close(x.grad(), mul(y, upstream), 1e-15);  // x is ones, so y is the scaled mask
  // A strided input: the mask follows the logical (row-major) order of x.
  const Tensor base = randn({6, 4}, kFloat64);
  manual_seed(5);
  const Tensor strided = dropout(base.t(), 0.5);
  manual_seed(5);
  const Tensor packed = dropout(base.t().contiguous(), 0.5);
  check_close(strided, packed, 0.0, 0.0);
}

TEST_CASE("dropout passes gradcheck with a fixed seed") {
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        manual_seed(42);  // the same mask on every evaluation
        return dropout(in[0], 0.3);
      },
      std::vector<Tensor>{leaf({4, 6})});
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        manual_seed(43);
        return dropout(in[0], 0.6);
      },
      std::vector<Tensor>{as_leaf(randn({5, 3}, kFloat64).t())});
}

TEST_CASE("dropout errors") {
  CHECK_THROWS_WITH_ALL(dropout(ones({2}), -0.1), "dropout", "[0, 1]", "-0.1");
  CHECK_THROWS_WITH_ALL(dropout(ones({2}), 1.5), "dropout", "[0, 1]", "1.5");
  CHECK_THROWS_WITH_ALL(dropout(ones({2}, kInt64), 0.5), "dropout", "floating point", "int64");
}
