// ember's own CPU gemms, cpu::bf16_gemm (bfloat16 on AVX512-BF16) and cpu::float16_gemm (float16
// widened as packed, float32 FMAs): each against a float64 product of the same 16-bit values, at
// shapes that cross every blocking edge (a tile's 12 rows and 32 columns, a row block, a column
// block's 4096 columns, odd depths, the 8192 past which depth is sliced), for the four layouts,
// padded leading dimensions, several alpha and beta, into float32 and into the 16-bit type; the
// vector kernel against the portable one (the arithmetic written out), bit for bit; one thread
// against several; and subnormals, infinities and NaNs.
//
// Tolerance: every product of two bfloat16 or two float16 values is exact in float32, so the
// only errors are the k + 1 float32 additions into each element (beta c included) and alpha's
// product: at most (k + 3) 2^-24 times the sum of the magnitudes of the terms (Higham's bound for
// recursive summation, rounded up).
#include <omp.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "core/cpu/bf16_gemm.h"
#include "core/cpu/float16_gemm.h"
#include "helpers.h"

namespace ember {
namespace {

using cpu::MatrixOperand;

struct Case {
  int64_t m, n, k;
};

// The two gemms, as the tests call them.
template <class T>
struct Gemms;

template <>
struct Gemms<BFloat16> {
  template <class Out>
  static void fast(int64_t m, int64_t n, int64_t k, float alpha, MatrixOperand<BFloat16> a, MatrixOperand<BFloat16> b,
                   float beta, Out* c, int64_t ldc) {
    cpu::bf16_gemm(m, n, k, alpha, a, b, beta, c, ldc);
  }
  template <class Out>
  static void portable(int64_t m, int64_t n, int64_t k, float alpha, MatrixOperand<BFloat16> a,
                       MatrixOperand<BFloat16> b, float beta, Out* c, int64_t ldc) {
    cpu::bf16_gemm_portable(m, n, k, alpha, a, b, beta, c, ldc);
  }
  // vdpbf16ps and vcvtneps2bf16 read subnormals as zero.
  static constexpr bool kFlushesSubnormals = true;
};

template <>
struct Gemms<Float16> {
  template <class Out>
  static void fast(int64_t m, int64_t n, int64_t k, float alpha, MatrixOperand<Float16> a, MatrixOperand<Float16> b,
                   float beta, Out* c, int64_t ldc) {
    cpu::float16_gemm(m, n, k, alpha, a, b, beta, c, ldc);
  }
  template <class Out>
  static void portable(int64_t m, int64_t n, int64_t k, float alpha, MatrixOperand<Float16> a,
                       MatrixOperand<Float16> b, float beta, Out* c, int64_t ldc) {
    cpu::float16_gemm_portable(m, n, k, alpha, a, b, beta, c, ldc);
  }
  static constexpr bool kFlushesSubnormals = false;
};

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
      const double bound = static_cast<double>(k + 3) * std::ldexp(std::fabs(alpha) * magnitude + std::fabs(old), -24);
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
void check_every_layout() {
  using G = Gemms<T>;
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
          const std::vector<float> vector_result = run<float>(G::template fast<float>, a, b, alpha, beta, before);
          check_against_float64(a, b, alpha, beta, before, vector_result);
          // The portable kernel is the vector kernel's arithmetic written out: same sums, same order.
          const std::vector<float> portable_result =
              run<float>(G::template portable<float>, a, b, alpha, beta, before);
          check_against_float64(a, b, alpha, beta, before, portable_result);
          CHECK(same_bits(vector_result, portable_result));
          // Into a 16-bit c: the float32 result from the same (rounded) c, rounded once where
          // stored (after reading a subnormal as zero, where the gemm's rounding does).
          std::vector<float> rounded_before;
          for (const float x : before) rounded_before.push_back(static_cast<float>(T(x)));
          const std::vector<float> from_rounded =
              run<float>(G::template fast<float>, a, b, alpha, beta, rounded_before);
          const std::vector<T> rounded = run<T>(G::template fast<T>, a, b, alpha, beta, before);
          for (size_t e = 0; e < rounded.size(); ++e) {
            float x = from_rounded[e];
            if (G::kFlushesSubnormals && std::fabs(x) < FLT_MIN) x = std::copysign(0.0f, x);
            if (rounded[e].bits != T(x).bits) FAIL("element " << e << ": " << x);
          }
          CHECK(same_bits(rounded, run<T>(G::template portable<T>, a, b, alpha, beta, before)));
        }
      }
    }
  }
}

TEST_CASE("bf16_gemm matches the float64 product within float32's summation bound, for every layout, alpha and "
          "beta") {
  check_every_layout<BFloat16>();
}

TEST_CASE("float16_gemm matches the float64 product within float32's summation bound, for every layout, alpha and "
          "beta") {
  check_every_layout<Float16>();
}

template <class T>
void check_threads() {
  // Past the size at which the product is shared out: 193 x 65 x 600 splits by rows and crosses a
  // row block; 40 x 4130 x 20 splits by columns and crosses a column block.
  std::mt19937 random(6);
  for (const Case& shape : {Case{193, 65, 600}, Case{40, 4130, 20}}) {
    CAPTURE(shape.m);
    const StoredMatrix<T> a(shape.m, shape.k, false, random), b(shape.k, shape.n, true, random);
    const std::vector<float> before = initial_c(shape.m, shape.n, 0.0f, random);
    const std::vector<float> shared = run<float>(Gemms<T>::template fast<float>, a, b, 1.0f, 0.0f, before);
    std::vector<float> alone;
    // Called inside a parallel region, the product runs on the calling thread alone.
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      alone = run<float>(Gemms<T>::template fast<float>, a, b, 1.0f, 0.0f, before);
    }
    CHECK(same_bits(shared, alone));
  }
}

TEST_CASE("bf16_gemm and float16_gemm give the same bits on one thread as on all of them") {
  check_threads<BFloat16>();
  check_threads<Float16>();
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
void check_special_values() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto gemm : {Gemms<T>::template fast<float>, Gemms<T>::template portable<float>}) {
    CHECK(dot<T>(gemm, {1.0f, 2.0f, 3.0f}, {inf, 1.0f, 1.0f}) == inf);  // pads add 0 * 0, not 0 * inf
    CHECK(std::isnan(dot<T>(gemm, {1.0f, 1.0f}, {nan, 1.0f})));
    CHECK(std::isnan(dot<T>(gemm, {0.0f}, {inf})));
    CHECK(dot<T>(gemm, {-1.0f, 1.0f}, {1.0f, 1.0f}) == 0.0f);
  }
}

TEST_CASE("bf16_gemm: subnormals count as zero, infinities and NaNs propagate, padding adds none") {
  check_special_values<BFloat16>();
  for (const auto gemm : {Gemms<BFloat16>::fast<float>, Gemms<BFloat16>::portable<float>}) {
    CHECK(dot<BFloat16>(gemm, {1.0f}, {std::ldexp(1.0f, -130)}) == 0.0f);  // a subnormal input reads as zero
    CHECK(dot<BFloat16>(gemm, {0x1p-64f}, {0x1p-64f}) == 0.0f);            // a subnormal product flushes
    CHECK(dot<BFloat16>(gemm, {0x1p-63f}, {0x1p-63f}) == 0x1p-126f);       // the smallest normal one does not
  }
}

TEST_CASE("float16_gemm: subnormals are exact, infinities and NaNs propagate, padding adds none") {
  check_special_values<Float16>();
  for (const auto gemm : {Gemms<Float16>::fast<float>, Gemms<Float16>::portable<float>}) {
    CHECK(dot<Float16>(gemm, {1.0f}, {0x1p-24f}) == 0x1p-24f);  // float16's smallest subnormal
    CHECK(dot<Float16>(gemm, {0x1p-24f}, {0x1p-24f}) == 0x1p-48f);
    CHECK(dot<Float16>(gemm, {65504.0f, 65504.0f}, {65504.0f, -65504.0f}) == 0.0f);  // float32 range
  }
}

}  // namespace
}  // namespace ember
