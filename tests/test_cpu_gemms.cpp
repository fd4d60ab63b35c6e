// ember's own CPU gemms, the bfloat16 one (in pairs on AVX512-BF16, widened onto float32 FMAs
// below it) and the float16 one (widened as packed, float32 FMAs), on every rung of instruction
// sets this CPU has (core/cpu/isa.h), each rung's table called directly: each against a float64
// product of the same 16-bit values, at shapes that cross every blocking edge (a tile's 6 or 12
// rows and 16 or 32 columns, a row block, a column block, odd depths, the 1024 past which depth is
// sliced), for the four layouts, padded leading dimensions, several alpha and beta, into float32
// and into the 16-bit type; the vector kernel against its scalar reference (the arithmetic
// written out), bit for bit; one thread against several; and subnormals, infinities and NaNs.
//
// Tolerance: every product of two bfloat16 or two float16 values is exact in float32, so the
// only errors are the k + 1 float32 additions into each element (beta c included), one more for
// each slice of depth added into c, and alpha's product: at most (k + k / 256 + 4) 2^-24 times
// the sum of the magnitudes of the terms (Higham's bound for recursive summation, rounded up).
#include <omp.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu/bf16_gemm.h"
#include "core/cpu/float16_gemm.h"
#include "core/cpu/kernel_table.h"
#include "cpu_rungs.h"
#include "helpers.h"

namespace ember {
namespace {

using cpu::MatrixOperand;
using testing::rungs_of_this_cpu;

struct Case {
  int64_t m, n, k;
};

// One rung's gemms for T, as the tests call them: the vector kernel, its scalar reference,
// whether they read subnormals as zero (the pairs of vdpbf16ps and AMX's tiles do), and whether
// the kernel gives its reference's bits (all but AMX's, whose sums are the hardware's own).
template <class T>
struct RungGemms {
  cpu::GemmKernels<T> fast, reference;
  bool flushes_subnormals, bitwise_reference;
};

template <class T>
RungGemms<T> gemms_of(const cpu::KernelTable& table) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return {table.bf16_gemm, table.bf16_gemm_reference, table.bf16_flushes_subnormals, table.bf16_reference_bitwise};
  } else {
    return {table.float16_gemm, table.float16_gemm_reference, false, true};
  }
}

// A stored matrix of op() shape [rows, cols]: its element (i, j) at i * ld + j, or at j * ld + i
// when transposed, with ld 3 past the minimum so that padding would be read if misused.
template <class T>
struct StoredMatrix {
  int64_t rows, cols;
  bool transposed;
  int64_t ld;
  std::vector<T> values;

  StoredMatrix(int64_t r, int64_t c, bool t, std::mt19937& random)
      : rows(r), cols(c), transposed(t), ld((t ? r : c) + 3),
        values(static_cast<size_t>((t ? c : r) * ld), T(std::numeric_limits<float>::quiet_NaN())) {
    // Values of several binades and both signs; the padding stays NaN.
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(-6, 3), sign(0, 1);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const float value = std::ldexp(mantissa(random), exponent(random)) * (sign(random) ? -1.0f : 1.0f);
        at(i, j) = T(value);
      }
    }
  }
  T& at(int64_t i, int64_t j) { return values[static_cast<size_t>(transposed ? j * ld + i : i * ld + j)]; }
  double value(int64_t i, int64_t j) const {
    return static_cast<float>(values[static_cast<size_t>(transposed ? j * ld + i : i * ld + j)]);
  }
  MatrixOperand<T> operand() const { return {values.data(), ld, transposed}; }
};

// c for beta: NaN where beta = 0 (it must not be read), random values otherwise; ldc = n + 5.
std::vector<float> initial_c(int64_t m, int64_t n, float beta, std::mt19937& random) {
  std::vector<float> c(static_cast<size_t>(m * (n + 5)), std::numeric_limits<float>::quiet_NaN());
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  if (beta != 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[static_cast<size_t>(i * (n + 5) + j)] = value(random);
    }
  }
  return c;
}

// Checks c against the float64 product within the summation bound; the padding between rows
// must be untouched (still NaN).
template <class T>
void check_against_float64(const StoredMatrix<T>& a, const StoredMatrix<T>& b, float alpha, float beta,
                           const std::vector<float>& before, const std::vector<float>& c) {
  const int64_t m = a.rows, n = b.cols, k = a.cols, ldc = n + 5;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double old = beta == 0 ? 0.0 : static_cast<double>(beta) * before[static_cast<size_t>(i * ldc + j)];
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += a.value(i, p) * b.value(p, j);
        magnitude += std::fabs(a.value(i, p) * b.value(p, j));
      }
      const double exact = alpha * sum + old;
      const double bound =
          static_cast<double>(k + k / 256 + 4) * std::ldexp(std::fabs(alpha) * magnitude + std::fabs(old), -24);
      // One assertion per failure, not per element: the cases hold millions of elements.
      if (!(std::fabs(c[static_cast<size_t>(i * ldc + j)] - exact) <= bound)) {
        FAIL("c[" << i << "][" << j << "] = " << c[static_cast<size_t>(i * ldc + j)] << ", exact " << exact);
      }
    }
    for (int64_t j = n; j < ldc; ++j) {
      if (!std::isnan(c[static_cast<size_t>(i * ldc + j)])) FAIL("padding c[" << i << "][" << j << "] was written");
    }
  }
}

// The product into a c of type Out that starts as `before` (rounded to Out; NaN stays NaN).
template <class Out, class T, class Gemm>
std::vector<Out> run(Gemm gemm, const StoredMatrix<T>& a, const StoredMatrix<T>& b, float alpha, float beta,
                     const std::vector<float>& before) {
  std::vector<Out> c;
  for (const float x : before) c.push_back(static_cast<Out>(x));
  gemm(a.rows, b.cols, a.cols, alpha, a.operand(), b.operand(), beta, c.data(), b.cols + 5);
  return c;
}

template <class X>
bool same_bits(const std::vector<X>& x, const std::vector<X>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(X)) == 0;
}

const std::vector<Case> kCases = {
    {1, 1, 1},     {12, 32, 2},    {13, 33, 3},  {11, 31, 255}, {193, 65, 257}, {7, 9, 513},
    {30, 70, 1025}, {5, 4130, 3}, {200, 40, 64}, {24, 64, 1},   {3, 5, 8195},   {200, 20, 2048},
};

template <class T>
void check_every_layout(const RungGemms<T>& gemms) {
  std::mt19937 random(5);
  for (const Case& shape : kCases) {
    for (const bool trans_a : {false, true}) {
      for (const bool trans_b : {false, true}) {
        for (const auto& [alpha, beta] :
             {std::pair{1.0f, 0.0f}, {1.0f, 1.0f}, {1.0f, 0.5f}, {0.125f, 0.0f}, {-3.0f, 1.0f}}) {
          CAPTURE(shape.m);
          CAPTURE(shape.n);
          CAPTURE(shape.k);
          CAPTURE(trans_a);
          CAPTURE(trans_b);
          CAPTURE(alpha);
          CAPTURE(beta);
          const StoredMatrix<T> a(shape.m, shape.k, trans_a, random), b(shape.k, shape.n, trans_b, random);
          const std::vector<float> before = initial_c(shape.m, shape.n, beta, random);
          const std::vector<float> vector_result = run<float>(gemms.fast.to_float, a, b, alpha, beta, before);
          check_against_float64(a, b, alpha, beta, before, vector_result);
          // The reference is the vector kernel's arithmetic written out: same sums, same order
          // (AMX's: within the same bound, checked above; and the same bits when run again).
          const std::vector<float> portable_result =
              run<float>(gemms.reference.to_float, a, b, alpha, beta, before);
          check_against_float64(a, b, alpha, beta, before, portable_result);
          if (gemms.bitwise_reference) {
            CHECK(same_bits(vector_result, portable_result));
          } else {
            CHECK(same_bits(vector_result, run<float>(gemms.fast.to_float, a, b, alpha, beta, before)));
          }
          // Into a 16-bit c: the float32 result from the same (rounded) c, rounded once where
          // stored (after reading a subnormal as zero, where the gemm's rounding does).
          std::vector<float> rounded_before;
          for (const float x : before) rounded_before.push_back(static_cast<float>(T(x)));
          const std::vector<float> from_rounded =
              run<float>(gemms.fast.to_float, a, b, alpha, beta, rounded_before);
          const std::vector<T> rounded = run<T>(gemms.fast.to_same, a, b, alpha, beta, before);
          for (size_t e = 0; e < rounded.size(); ++e) {
            float x = from_rounded[e];
            if (gemms.flushes_subnormals && std::fabs(x) < FLT_MIN) x = std::copysign(0.0f, x);
            if (rounded[e].bits != T(x).bits) FAIL("element " << e << ": " << x);
          }
          if (gemms.bitwise_reference) {
            CHECK(same_bits(rounded, run<T>(gemms.reference.to_same, a, b, alpha, beta, before)));
          }
        }
      }
    }
  }
}

TEST_CASE("bf16_gemm matches the float64 product within float32's summation bound, for every layout, alpha and "
          "beta, on every rung") {
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
    CAPTURE(cpu::cpu_isa_name(rung));
    check_every_layout(gemms_of<BFloat16>(cpu::kernel_table(rung)));
  }
}

TEST_CASE("float16_gemm matches the float64 product within float32's summation bound, for every layout, alpha and "
          "beta, on every rung") {
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
    CAPTURE(cpu::cpu_isa_name(rung));
    check_every_layout(gemms_of<Float16>(cpu::kernel_table(rung)));
  }
}

TEST_CASE("the public gemms run the kernels of the rung in use") {
  std::mt19937 random(9);
  const StoredMatrix<BFloat16> a(13, 40, false, random), b(40, 17, true, random);
  const std::vector<float> before = initial_c(13, 17, 0.0f, random);
  const RungGemms<BFloat16> in_use = gemms_of<BFloat16>(cpu::kernels());
  CHECK(same_bits(run<float>(cpu::bf16_gemm<float>, a, b, 1.0f, 0.0f, before),
                  run<float>(in_use.fast.to_float, a, b, 1.0f, 0.0f, before)));
  CHECK(same_bits(run<float>(cpu::bf16_gemm_reference<float>, a, b, 1.0f, 0.0f, before),
                  run<float>(in_use.reference.to_float, a, b, 1.0f, 0.0f, before)));
  CHECK(cpu::bf16_gemm_in_hardware() == (cpu::cpu_isa() != cpu::CpuIsa::kPortable));
  CHECK(cpu::bf16_products_in_pairs() == (cpu::cpu_isa() >= cpu::CpuIsa::kAvx512Bf16));
}

template <class T>
void check_threads(const RungGemms<T>& gemms) {
  // Past the size at which the product is shared out: 193 x 65 x 600 splits by rows and crosses a
  // row block; 40 x 4130 x 20 splits by columns and crosses a column block.
  std::mt19937 random(6);
  for (const Case& shape : {Case{193, 65, 600}, Case{40, 4130, 20}}) {
    CAPTURE(shape.m);
    const StoredMatrix<T> a(shape.m, shape.k, false, random), b(shape.k, shape.n, true, random);
    const std::vector<float> before = initial_c(shape.m, shape.n, 0.0f, random);
    const std::vector<float> shared = run<float>(gemms.fast.to_float, a, b, 1.0f, 0.0f, before);
    std::vector<float> alone;
    // Called inside a parallel region, the product runs on the calling thread alone.
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      alone = run<float>(gemms.fast.to_float, a, b, 1.0f, 0.0f, before);
    }
    CHECK(same_bits(shared, alone));
  }
}

TEST_CASE("bf16_gemm and float16_gemm give the same bits on one thread as on all of them") {
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
    CAPTURE(cpu::cpu_isa_name(rung));
    check_threads(gemms_of<BFloat16>(cpu::kernel_table(rung)));
    check_threads(gemms_of<Float16>(cpu::kernel_table(rung)));
  }
}

// op(a) [1, k] times op(b) [k, 1]: one element, padded to a whole tile (and, for bfloat16, an
// even depth).
template <class T, class Gemm>
float dot(Gemm gemm, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<T> a16, b16;
  for (const float x : a) a16.push_back(T(x));
  for (const float x : b) b16.push_back(T(x));
  float c = -1.0f;
  const auto k = static_cast<int64_t>(a.size());
  gemm(1, 1, k, 1.0f, {a16.data(), k, false}, {b16.data(), 1, false}, 0.0f, &c, 1);
  return c;
}

template <class T>
void check_special_values(const RungGemms<T>& gemms) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto gemm : {gemms.fast.to_float, gemms.reference.to_float}) {
    CHECK(dot<T>(gemm, {1.0f, 2.0f, 3.0f}, {inf, 1.0f, 1.0f}) == inf);  // pads add 0 * 0, not 0 * inf
    CHECK(std::isnan(dot<T>(gemm, {1.0f, 1.0f}, {nan, 1.0f})));
    CHECK(std::isnan(dot<T>(gemm, {0.0f}, {inf})));
    CHECK(dot<T>(gemm, {-1.0f, 1.0f}, {1.0f, 1.0f}) == 0.0f);
  }
}

TEST_CASE("bf16_gemm: subnormals count as zero in pairs and are exact when widened; infinities and NaNs propagate, "
          "padding adds none") {
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
    CAPTURE(cpu::cpu_isa_name(rung));
    const RungGemms<BFloat16> gemms = gemms_of<BFloat16>(cpu::kernel_table(rung));
    check_special_values(gemms);
    for (const auto gemm : {gemms.fast.to_float, gemms.reference.to_float}) {
      if (gemms.flushes_subnormals) {
        CHECK(dot<BFloat16>(gemm, {1.0f}, {std::ldexp(1.0f, -130)}) == 0.0f);  // a subnormal input reads as zero
        CHECK(dot<BFloat16>(gemm, {0x1p-64f}, {0x1p-64f}) == 0.0f);            // a subnormal product flushes
      } else {
        CHECK(dot<BFloat16>(gemm, {1.0f}, {std::ldexp(1.0f, -130)}) == std::ldexp(1.0f, -130));
        CHECK(dot<BFloat16>(gemm, {0x1p-64f}, {0x1p-64f}) == 0x1p-128f);
      }
      CHECK(dot<BFloat16>(gemm, {0x1p-63f}, {0x1p-63f}) == 0x1p-126f);  // the smallest normal one either way
    }
  }
}

TEST_CASE("float16_gemm: subnormals are exact, infinities and NaNs propagate, padding adds none") {
  for (const cpu::CpuIsa rung : rungs_of_this_cpu()) {
    CAPTURE(cpu::cpu_isa_name(rung));
    const RungGemms<Float16> gemms = gemms_of<Float16>(cpu::kernel_table(rung));
    check_special_values(gemms);
    for (const auto gemm : {gemms.fast.to_float, gemms.reference.to_float}) {
      CHECK(dot<Float16>(gemm, {1.0f}, {0x1p-24f}) == 0x1p-24f);  // float16's smallest subnormal
      CHECK(dot<Float16>(gemm, {0x1p-24f}, {0x1p-24f}) == 0x1p-48f);
      CHECK(dot<Float16>(gemm, {65504.0f, 65504.0f}, {65504.0f, -65504.0f}) == 0.0f);  // float32 range
    }
  }
}

}  // namespace
}  // namespace ember
