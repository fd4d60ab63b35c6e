// The packed layout of the float32 products (core/cpu/kernels/packed_gemm.h): 16-bit operands
// widened to float32 as they are packed, one float32 per value, for the FMA micro-kernels of
// core/cpu/kernels/fma_kernels.h. Widening inside the packing, which reads every operand value
// anyway, spares the float32 copies of both operands that sgemm would need.
//
// A strip of a holds, for each k, its kRows rows' values side by side; a panel of b, for each k,
// its kColumns columns' values. Rows and columns past the matrix are packed as zeros, so only
// the stores look at the edges.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/cpu/kernel_table.h"
#include "core/cpu/kernels/packed_gemm.h"
#include "core/cpu/kernels/rung_namespace.h"
#include "core/cpu/matrix_operand.h"
#include "core/half.h"

#if defined(__F16C__)
#include "core/cpu/x86_intrinsics.h"
#endif

namespace ember::cpu::EMBER_CPU_KERNELS {

// to[i] = x[i] as float32, exactly (both 16-bit formats widen without rounding).
template <class In>
void widen(const In* x, int64_t n, float* to) {
  int64_t i = 0;
  if constexpr (std::is_same_v<In, Float16>) {
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(to + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
    }
#endif
    for (; i < n; ++i) to[i] = half_bits::float16_to_float(x[i].bits);
  } else {
    for (; i < n; ++i) to[i] = half_bits::bfloat16_to_float(x[i].bits);
  }
}

template <class InType>
struct WidenedFormat {
  using In = InType;
  using Word = float;
  static constexpr int64_t kDepthPerWord = 1;

  // Rows [row0, row0 + rows) of op(a) [*, depth], as strips of kRows rows (the last one
  // zero-padded), each strip depth x kRows values.
  template <int64_t kRows>
  static void pack_strips(const MatrixOperand<In>& a, int64_t row0, int64_t rows, int64_t depth, float* packed) {
    const int64_t strips = (rows + kRows - 1) / kRows;
    for (int64_t s = 0; s < strips; ++s) {
      float* strip = packed + s * depth * kRows;
      const int64_t valid = smaller(kRows, rows - s * kRows);
      if (valid < kRows) fill(strip, depth * kRows, 0.0f);
      if (!a.transposed) {  // a row of op(a) is contiguous along k: widened whole, then spread
        auto* const widened = static_cast<float*>(thread_scratch(packed::kWidenedLine, depth * 4));
        for (int64_t r = 0; r < valid; ++r) {
          widen(a.data + (row0 + s * kRows + r) * a.ld, depth, widened);
          for (int64_t p = 0; p < depth; ++p) strip[p * kRows + r] = widened[p];
        }
      } else if (valid < kRows) {  // the last, partial strip; the whole ones below
        for (int64_t p = 0; p < depth; ++p) widen(a.data + p * a.ld + row0 + s * kRows, valid, strip + p * kRows);
      }
    }
    if (a.transposed) {
      // The rows of op(a) at one k are contiguous: each such line is read once, in order, and
      // dealt out to the whole strips. (Strip by strip, a deep product would walk all k lines of
      // memory once per strip, and the lines would leave the cache between strips.)
      const int64_t whole_strips = rows / kRows;
      for (int64_t p = 0; p < depth; ++p) {
        const In* line = a.data + p * a.ld + row0;
        for (int64_t s = 0; s < whole_strips; ++s) widen(line + s * kRows, kRows, packed + (s * depth + p) * kRows);
      }
    }
  }

  // Columns [col0, col0 + cols) of op(b) [depth, *], cols <= kColumns, as one panel of
  // depth x kColumns values (zero-padded past cols).
  template <int64_t kColumns>
  static void pack_panel(const MatrixOperand<In>& b, int64_t depth, int64_t col0, int64_t cols, float* panel) {
    if (cols < kColumns) fill(panel, depth * kColumns, 0.0f);
    if (!b.transposed) {  // a row of op(b) is contiguous along the columns
      for (int64_t p = 0; p < depth; ++p) widen(b.data + p * b.ld + col0, cols, panel + p * kColumns);
    } else {  // a column of op(b) is contiguous along k: widened whole, then spread
      auto* const widened = static_cast<float*>(thread_scratch(packed::kWidenedLine, depth * 4));
      for (int64_t j = 0; j < cols; ++j) {
        widen(b.data + (col0 + j) * b.ld, depth, widened);
        for (int64_t p = 0; p < depth; ++p) panel[p * kColumns + j] = widened[p];
      }
    }
  }
};

}  // namespace ember::cpu::EMBER_CPU_KERNELS
