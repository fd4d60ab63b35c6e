// cpu::bf16_gemm, the CPU's bfloat16 product: against a float64 product of the same bfloat16
// values, at shapes that cross every blocking edge (a tile's 12 rows and 32 columns, a row
// block, a column block's 4096 columns, odd depths, the 8192 past which depth is sliced), for
// the four layouts, padded leading dimensions, several alpha and beta, into float32 and into
// bfloat16; the vector kernel against the instruction's arithmetic written out (the portable
// kernel), bit for bit; one thread against several; and the instruction's treatment of
// subnormals, infinities and NaNs.
//
// Tolerance: every product of two bfloat16 values is exact in float32, so the only errors are the
// k + 1 float32 additions into each element (beta c included) and alpha's product: at most
// (k + 3) 2^-24 times the sum of the magnitudes of the terms (Higham's bound for recursive
// summation, rounded up).
#include <omp.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "core/cpu/bf16_gemm.h"
#include "helpers.h"

namespace ember {
namespace {

using cpu::Bf16Operand;

struct Case {
  int64_t m, n, k;
};

// A stored matrix of op() shape [rows, cols]: its element (i, j) at i * ld + j, or at j * ld + i
// when transposed, with ld 3 past the minimum so that padding would be read if misused.
struct StoredMatrix {
  int64_t rows, cols;
  bool transposed;
  int64_t ld;
  std::vector<BFloat16> values;

  StoredMatrix(int64_t r, int64_t c, bool t, std::mt19937& random)
      : rows(r), cols(c), transposed(t), ld((t ? r : c) + 3),
        values(static_cast<size_t>((t ? c : r) * ld), BFloat16(std::numeric_limits<float>::quiet_NaN())) {
    // Values of several binades and both signs; the padding stays NaN.
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(-6, 3), sign(0, 1);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const float value = std::ldexp(mantissa(random), exponent(random)) * (sign(random) ? -1.0f : 1.0f);
        at(i, j) = BFloat16(value);
      }
    }
  }
  BFloat16& at(int64_t i, int64_t j) { return values[static_cast<size_t>(transposed ? j * ld + i : i * ld + j)]; }
  double value(int64_t i, int64_t j) const {
    return static_cast<float>(values[static_cast<size_t>(transposed ? j * ld + i : i * ld + j)]);
  }
  Bf16Operand operand() const { return {values.data(), ld, transposed}; }
};

using Gemm = void (*)(int64_t, int64_t, int64_t, float, Bf16Operand, Bf16Operand, float, float*, int64_t);

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
void check_against_float64(const StoredMatrix& a, const StoredMatrix& b, float alpha, float beta,
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
      const double bound = static_cast<double>(k + 3) * std::ldexp(std::fabs(alpha) * magnitude + std::fabs(old), -24);
      REQUIRE_MESSAGE(std::fabs(c[static_cast<size_t>(i * ldc + j)] - exact) <= bound,
                      "c[" << i << "][" << j << "] = " << c[static_cast<size_t>(i * ldc + j)] << ", exact " << exact);
    }
    for (int64_t j = n; j < ldc; ++j) REQUIRE(std::isnan(c[static_cast<size_t>(i * ldc + j)]));
  }
}

std::vector<float> run(Gemm gemm, const StoredMatrix& a, const StoredMatrix& b, float alpha, float beta,
                       const std::vector<float>& before) {
  std::vector<float> c = before;
  gemm(a.rows, b.cols, a.cols, alpha, a.operand(), b.operand(), beta, c.data(), b.cols + 5);
  return c;
}

template <class T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

using Bf16Gemm = void (*)(int64_t, int64_t, int64_t, float, Bf16Operand, Bf16Operand, float, BFloat16*, int64_t);

// The product into a bfloat16 c that starts as `before` rounded (NaN stays NaN).
std::vector<BFloat16> run_rounded(Bf16Gemm gemm, const StoredMatrix& a, const StoredMatrix& b, float alpha,
                                  float beta, const std::vector<float>& before) {
  std::vector<BFloat16> c;
  for (const float x : before) c.push_back(BFloat16(x));
  gemm(a.rows, b.cols, a.cols, alpha, a.operand(), b.operand(), beta, c.data(), b.cols + 5);
  return c;
}

const std::vector<Case> kCases = {
    {1, 1, 1},     {12, 32, 2},   {13, 33, 3},  {11, 31, 255}, {193, 65, 257},
    {7, 9, 513},   {30, 70, 1025}, {5, 4130, 3}, {200, 40, 64}, {24, 64, 1}, {3, 5, 8195}, {500, 40, 2048},
};

TEST_CASE("bf16_gemm matches the float64 product within float32's summation bound, for every layout, alpha and beta") {
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
          const StoredMatrix a(shape.m, shape.k, trans_a, random), b(shape.k, shape.n, trans_b, random);
          const std::vector<float> before = initial_c(shape.m, shape.n, beta, random);
          const std::vector<float> vector_result = run(cpu::bf16_gemm, a, b, alpha, beta, before);
          check_against_float64(a, b, alpha, beta, before, vector_result);
          // The portable kernel is the instruction's arithmetic written out: same sums, same order.
          const std::vector<float> portable_result = run(cpu::bf16_gemm_portable, a, b, alpha, beta, before);
          check_against_float64(a, b, alpha, beta, before, portable_result);
          CHECK(same_bits(vector_result, portable_result));
          // Into a bfloat16 c: the float32 result from the same (rounded) c, rounded once where
          // stored, subnormals read as zero as vcvtneps2bf16 reads them.
          std::vector<float> rounded_before;
          for (const float x : before) rounded_before.push_back(static_cast<float>(BFloat16(x)));
          const std::vector<float> from_rounded = run(cpu::bf16_gemm, a, b, alpha, beta, rounded_before);
          const std::vector<BFloat16> rounded = run_rounded(cpu::bf16_gemm, a, b, alpha, beta, before);
          for (size_t e = 0; e < rounded.size(); ++e) {
            const float x = from_rounded[e];
            const BFloat16 expected(std::fabs(x) < FLT_MIN ? std::copysign(0.0f, x) : x);
            REQUIRE_MESSAGE(rounded[e].bits == expected.bits, "element " << e << ": " << x);
          }
          CHECK(same_bits(rounded, run_rounded(cpu::bf16_gemm_portable, a, b, alpha, beta, before)));
        }
      }
    }
  }
}

TEST_CASE("bf16_gemm gives the same bits on one thread as on all of them") {
  // Past the size at which the product is shared out: 193 x 65 x 600 splits by rows and crosses a
  // row block; 40 x 4130 x 20 splits by columns and crosses a column block.
  std::mt19937 random(6);
  for (const Case& shape : {Case{193, 65, 600}, Case{40, 4130, 20}}) {
    CAPTURE(shape.m);
    const StoredMatrix a(shape.m, shape.k, false, random), b(shape.k, shape.n, true, random);
    const std::vector<float> before = initial_c(shape.m, shape.n, 0.0f, random);
    const std::vector<float> shared = run(cpu::bf16_gemm, a, b, 1.0f, 0.0f, before);
    std::vector<float> alone;
    // Called inside a parallel region, the product runs on the calling thread alone.
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      alone = run(cpu::bf16_gemm, a, b, 1.0f, 0.0f, before);
    }
    CHECK(same_bits(shared, alone));
  }
}

TEST_CASE("bf16_gemm: subnormals count as zero, infinities and NaNs propagate, padding adds none") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // op(a) [1, k] times op(b) [k, 1]: one element, padded to a whole tile and an even depth.
  const auto dot = [](Gemm gemm, const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<BFloat16> a16, b16;
    for (const float x : a) a16.push_back(BFloat16(x));
    for (const float x : b) b16.push_back(BFloat16(x));
    float c = -1.0f;
    const auto k = static_cast<int64_t>(a.size());
    gemm(1, 1, k, 1.0f, {a16.data(), k, false}, {b16.data(), 1, false}, 0.0f, &c, 1);
    return c;
  };
  for (const Gemm gemm : {static_cast<Gemm>(cpu::bf16_gemm), static_cast<Gemm>(cpu::bf16_gemm_portable)}) {
    CHECK(dot(gemm, {1.0f}, {std::ldexp(1.0f, -130)}) == 0.0f);  // a subnormal input reads as zero
    CHECK(dot(gemm, {0x1p-64f}, {0x1p-64f}) == 0.0f);            // a subnormal product flushes to zero
    CHECK(dot(gemm, {0x1p-63f}, {0x1p-63f}) == 0x1p-126f);       // the smallest normal one does not
    CHECK(dot(gemm, {1.0f, 2.0f, 3.0f}, {inf, 1.0f, 1.0f}) == inf);  // the pad pair adds 0 * 0, not 0 * inf
    CHECK(std::isnan(dot(gemm, {1.0f, 1.0f}, {nan, 1.0f})));
    CHECK(std::isnan(dot(gemm, {0.0f}, {inf})));
    CHECK(dot(gemm, {-1.0f, 1.0f}, {1.0f, 1.0f}) == 0.0f);
  }
}

}  // namespace
}  // namespace ember
