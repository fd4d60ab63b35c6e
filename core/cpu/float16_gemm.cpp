// ember's float16 product (core/cpu/float16_gemm.h) in the blocked loops of
// core/cpu/packed_gemm.h: operands widened to float32 as they are packed, and float32 FMA
// micro-kernels.
//
// Packed layout: one float32 per value. A strip of a holds, for each k, its kRows rows' values
// side by side; a panel of b, for each k, its kColumns columns' values. Per k the micro-kernel
// loads two vectors of 16 values of b and broadcasts one value of a per row: 24 FMAs on 24
// accumulator registers. Rows and columns past the matrix are packed as zeros, so only the
// stores look at the edges.
#include "core/cpu/float16_gemm.h"

#include <algorithm>
#include <cmath>

#include "core/cpu/half_rows.h"
#include "core/cpu/packed_gemm.h"

namespace ember::cpu {
namespace {

using packed::kColumns;
using packed::kRows;

struct WidenedFormat {
  using In = Float16;
  using Word = float;
  static constexpr int64_t kDepthPerWord = 1;

  // Rows [row0, row0 + rows) of op(a) [*, depth], as strips of kRows rows (the last one
  // zero-padded), each strip depth x kRows values.
  static void pack_strips(const Float16Operand& a, int64_t row0, int64_t rows, int64_t depth, float* packed) {
    const int64_t strips = (rows + kRows - 1) / kRows;
    for (int64_t s = 0; s < strips; ++s) {
      float* strip = packed + s * depth * kRows;
      const int64_t valid = std::min(kRows, rows - s * kRows);
      if (valid < kRows) std::fill(strip, strip + depth * kRows, 0.0f);
      if (!a.transposed) {  // a row of op(a) is contiguous along k: widened whole, then spread
        float* const widened = packed::scratch<float, 2>(depth);
        for (int64_t r = 0; r < valid; ++r) {
          widen_row(a.data + (row0 + s * kRows + r) * a.ld, depth, widened);
          for (int64_t p = 0; p < depth; ++p) strip[p * kRows + r] = widened[p];
        }
      } else {  // the strip's rows at one k are contiguous
        for (int64_t p = 0; p < depth; ++p) widen_row(a.data + p * a.ld + row0 + s * kRows, valid, strip + p * kRows);
      }
    }
  }

  // Columns [col0, col0 + cols) of op(b) [depth, *], cols <= kColumns, as one panel of
  // depth x kColumns values (zero-padded past cols).
  static void pack_panel(const Float16Operand& b, int64_t depth, int64_t col0, int64_t cols, float* panel) {
    if (cols < kColumns) std::fill(panel, panel + depth * kColumns, 0.0f);
    if (!b.transposed) {  // a row of op(b) is contiguous along the columns
      for (int64_t p = 0; p < depth; ++p) widen_row(b.data + p * b.ld + col0, cols, panel + p * kColumns);
    } else {  // a column of op(b) is contiguous along k: widened whole, then spread
      float* const widened = packed::scratch<float, 2>(depth);
      for (int64_t j = 0; j < cols; ++j) {
        widen_row(b.data + (col0 + j) * b.ld, depth, widened);
        for (int64_t p = 0; p < depth; ++p) panel[p * kColumns + j] = widened[p];
      }
    }
  }
};

// The micro-kernels: tile = the strip times the panel, each sum a chain of FMAs in k's order,
// then the store of core/cpu/packed_gemm.h (alpha, beta c, rounded once into a float16 c).
struct PortableKernel {
  template <class Out>
  static void run(int64_t depth, const float* strip, const float* panel, Out* c, int64_t ldc, int64_t rows,
                  int64_t cols, float alpha, float beta) {
    float tile[kRows][kColumns] = {};
    for (int64_t p = 0; p < depth; ++p) {
      for (int64_t r = 0; r < kRows; ++r) {
        const float a = strip[p * kRows + r];
        for (int64_t j = 0; j < kColumns; ++j) tile[r][j] = std::fma(a, panel[p * kColumns + j], tile[r][j]);
      }
    }
    packed::store_tile</*kFlushToBf16=*/false>(tile, c, ldc, rows, cols, alpha, beta);
  }
};

#if defined(EMBER_PACKED_GEMM_AVX512)
// The tile in 24 registers; per k, two loads of b, kRows broadcasts of a, 2 kRows FMAs (each the
// single rounding std::fma is).
struct Avx512Kernel {
  template <class Out>
  static void run(int64_t depth, const float* strip, const float* panel, Out* c, int64_t ldc, int64_t rows,
                  int64_t cols, float alpha, float beta) {
    __m512 left[kRows], right[kRows];
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) left[r] = right[r] = _mm512_setzero_ps();
    for (int64_t p = 0; p < depth; ++p) {
      const __m512 b_left = _mm512_loadu_ps(panel + p * kColumns), b_right = _mm512_loadu_ps(panel + p * kColumns + 16);
      const float* a = strip + p * kRows;
#pragma GCC unroll 12
      for (int r = 0; r < kRows; ++r) {
        const __m512 a_value = _mm512_set1_ps(a[r]);
        left[r] = _mm512_fmadd_ps(a_value, b_left, left[r]);
        right[r] = _mm512_fmadd_ps(a_value, b_right, right[r]);
      }
    }
    packed::store_rows(left, right, c, ldc, rows, cols, alpha, beta);
  }
};
using FastestKernel = Avx512Kernel;
#else
using FastestKernel = PortableKernel;
#endif

}  // namespace

bool float16_gemm_in_hardware() { return !std::is_same_v<FastestKernel, PortableKernel>; }

template <class Out>
void float16_gemm(int64_t m, int64_t n, int64_t k, float alpha, Float16Operand a, Float16Operand b, float beta, Out* c,
                  int64_t ldc) {
  packed::shared_gemm<WidenedFormat, FastestKernel>(m, n, k, alpha, a, b, beta, c, ldc);
}

template <class Out>
void float16_gemm_portable(int64_t m, int64_t n, int64_t k, float alpha, Float16Operand a, Float16Operand b,
                           float beta, Out* c, int64_t ldc) {
  packed::shared_gemm<WidenedFormat, PortableKernel>(m, n, k, alpha, a, b, beta, c, ldc);
}

template void float16_gemm(int64_t, int64_t, int64_t, float, Float16Operand, Float16Operand, float, float*, int64_t);
template void float16_gemm(int64_t, int64_t, int64_t, float, Float16Operand, Float16Operand, float, Float16*,
                           int64_t);
template void float16_gemm_portable(int64_t, int64_t, int64_t, float, Float16Operand, Float16Operand, float, float*,
                                    int64_t);
template void float16_gemm_portable(int64_t, int64_t, int64_t, float, Float16Operand, Float16Operand, float,
                                    Float16*, int64_t);

}  // namespace ember::cpu
