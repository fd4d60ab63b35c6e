// bfloat16 products on AVX512-BF16's vdpbf16ps, in the blocked loops of
// core/cpu/kernels/packed_gemm.h: the packing of the instruction's pairs, and its micro-kernels.
//
// Packed layout: vdpbf16ps takes bfloat16 values in pairs along k: a 32-bit word holds elements
// k = 2q (low half) and 2q + 1 (high half). A strip of a is stored pair by pair, the kRows words
// of pair q side by side; a panel of b likewise, the kColumns words of pair q side by side. So
// for each pair the micro-kernel loads two vectors of 16 words of b and broadcasts one word of a
// per row. Rows, columns and pairs past the matrix are packed as zeros, so the micro-kernel
// always computes a whole tile and only its stores look at the edges; a zero pad of a meets a
// zero pad of b, never an infinity.
//
// Measured on one core of an AMD EPYC (Zen 4) with AVX512-BF16: at 4096 x 512 x 512, 195-205
// GFLOP/s, and at 512 x 512 x 4096 184-189 (vdpbf16ps alone peaks at 234; OpenBLAS's sgemm gives
// 100 on either); on both cores, 439 GFLOP/s at 4096 x 512 x 512 (bench_matmul), against sgemm's
// 208. Whole-depth slices gave those; slices of 256, 384 and 512 along k gave 179, 172 and 203.
#pragma once

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "core/cpu/kernels/fma_kernels.h"
#include "core/cpu/kernels/packed_gemm.h"
#include "core/cpu/kernels/rung_namespace.h"
#include "core/cpu/matrix_operand.h"
#include "core/half.h"

namespace ember::cpu::EMBER_CPU_KERNELS {

// Elements k = 2q and 2q + 1 of a row or column, as one word: the even one in the low half.
inline uint32_t pair_word(uint16_t even, uint16_t odd) {
  return static_cast<uint32_t>(even) | static_cast<uint32_t>(odd) << 16;
}

struct PairFormat {
  using In = BFloat16;
  using Word = uint32_t;
  static constexpr int64_t kDepthPerWord = 2;

  // Rows [row0, row0 + rows) of op(a) [*, depth], packed as strips of kRows rows (the last one
  // zero-padded), each strip pairs x kRows words.
  template <int64_t kRows>
  static void pack_strips(const MatrixOperand<BFloat16>& a, int64_t row0, int64_t rows, int64_t depth,
                          uint32_t* packed) {
    const int64_t pairs = (depth + 1) / 2;
    const int64_t strips = (rows + kRows - 1) / kRows;
    for (int64_t s = 0; s < strips; ++s) {
      uint32_t* strip = packed + s * pairs * kRows;
      const int64_t valid = smaller(kRows, rows - s * kRows);
      if (valid < kRows) fill(strip, pairs * kRows, 0u);
      if (!a.transposed) {  // a row of op(a) is contiguous along k
        for (int64_t r = 0; r < valid; ++r) {
          const BFloat16* row = a.data + (row0 + s * kRows + r) * a.ld;
          for (int64_t q = 0; 2 * q + 1 < depth; ++q) {
            strip[q * kRows + r] = pair_word(row[2 * q].bits, row[2 * q + 1].bits);
          }
          if (depth % 2 == 1) strip[(pairs - 1) * kRows + r] = pair_word(row[depth - 1].bits, 0);
        }
      } else {  // a column of op(a) is contiguous: pair q joins two of them
        for (int64_t q = 0; q < pairs; ++q) {
          const BFloat16* even = a.data + 2 * q * a.ld + row0 + s * kRows;
          const BFloat16* odd = 2 * q + 1 < depth ? even + a.ld : nullptr;
          for (int64_t r = 0; r < valid; ++r) strip[q * kRows + r] = pair_word(even[r].bits, odd ? odd[r].bits : 0);
        }
      }
    }
  }

  // Columns [col0, col0 + cols) of op(b) [depth, *], cols <= kColumns, packed as one panel of
  // pairs x kColumns words (zero-padded past cols).
  template <int64_t kColumns>
  static void pack_panel(const MatrixOperand<BFloat16>& b, int64_t depth, int64_t col0, int64_t cols,
                         uint32_t* panel) {
    const int64_t pairs = (depth + 1) / 2;
    if (cols < kColumns) fill(panel, pairs * kColumns, 0u);
    if (!b.transposed) {  // a row of op(b) is contiguous along the columns: pair q joins two rows
      for (int64_t q = 0; q < pairs; ++q) {
        const BFloat16* even = b.data + 2 * q * b.ld + col0;
        uint32_t* words = panel + q * kColumns;
        if (2 * q + 1 < depth) {
          const BFloat16* odd = even + b.ld;
          for (int64_t j = 0; j < cols; ++j) words[j] = pair_word(even[j].bits, odd[j].bits);
        } else {
          for (int64_t j = 0; j < cols; ++j) words[j] = pair_word(even[j].bits, 0);
        }
      }
    } else {  // a column of op(b) is contiguous along k
      for (int64_t j = 0; j < cols; ++j) {
        const BFloat16* column = b.data + (col0 + j) * b.ld;
        for (int64_t q = 0; 2 * q + 1 < depth; ++q) {
          panel[q * kColumns + j] = pair_word(column[2 * q].bits, column[2 * q + 1].bits);
        }
        if (depth % 2 == 1) panel[(pairs - 1) * kColumns + j] = pair_word(column[depth - 1].bits, 0);
      }
    }
  }
};

// The micro-kernels. Each computes tile = the strip times the panel, then for the r < rows and
// j < cols inside the matrix stores c[r][j] = alpha tile[r][j] + beta c[r][j] (beta = 0: c not
// read), rounded once into a bfloat16 c. Out is float or BFloat16.

// The instruction's arithmetic on one lane, written out: subnormal inputs and results are zero,
// and the high pair's product is added before the low one's, each sum rounded to float32 (the
// order vdpbf16ps specifies; measured the same on the AMD Zen 4 that has it).
inline float flush_subnormal(float x) { return std::fabs(x) < FLT_MIN ? std::copysign(0.0f, x) : x; }

inline float bf16_half_as_float(uint32_t word, int shift) {
  return flush_subnormal(std::bit_cast<float>((word >> shift & 0xffffu) << 16));
}

struct PortablePairKernel {
  static constexpr int64_t kRows = 12, kColumns = 32;
  template <class Out>
  static void run(int64_t pairs, const uint32_t* strip, const uint32_t* panel, Out* c, int64_t ldc, int64_t rows,
                  int64_t cols, float alpha, float beta) {
    float tile[kRows][kColumns] = {};
    for (int64_t q = 0; q < pairs; ++q) {
      for (int64_t r = 0; r < kRows; ++r) {
        const uint32_t a = strip[q * kRows + r];
        const float a_even = bf16_half_as_float(a, 0), a_odd = bf16_half_as_float(a, 16);
        for (int64_t j = 0; j < kColumns; ++j) {
          const uint32_t b = panel[q * kColumns + j];
          float sum = flush_subnormal(tile[r][j]);
          sum = flush_subnormal(sum + a_odd * bf16_half_as_float(b, 16));
          tile[r][j] = flush_subnormal(sum + a_even * bf16_half_as_float(b, 0));
        }
      }
    }
    packed::store_tile</*kFlushToBf16=*/true>(tile, c, ldc, rows, cols, alpha, beta);
  }
};

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512BF16__)
// One pair of a's values in every lane. clang 16 crashes (its x86 back end segfaults) when it
// folds a broadcast into vdpbf16ps's operand; an empty asm statement hides the broadcast from it.
inline __m512bh broadcast_pair(uint32_t pair) {
  __m512i lanes = _mm512_set1_epi32(static_cast<int>(pair));
#if defined(__clang__)
  __asm__("" : "+v"(lanes));
#endif
  return reinterpret_cast<__m512bh>(lanes);
}

// The tile in 24 registers; per pair of k, two loads of b, kRows broadcasts of a, 2 kRows
// vdpbf16ps. The loops over r unroll, so the accumulators never leave their registers.
struct Avx512Bf16PairKernel {
  static constexpr int64_t kRows = 12, kColumns = 32;
  template <class Out>
  static void run(int64_t pairs, const uint32_t* strip, const uint32_t* panel, Out* c, int64_t ldc, int64_t rows,
                  int64_t cols, float alpha, float beta) {
    __m512 left[kRows], right[kRows];
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) left[r] = right[r] = _mm512_setzero_ps();
    for (int64_t q = 0; q < pairs; ++q) {
      const auto b_left = reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + q * kColumns));
      const auto b_right = reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + q * kColumns + 16));
      const uint32_t* a = strip + q * kRows;
#pragma GCC unroll 12
      for (int r = 0; r < kRows; ++r) {
        const __m512bh a_pair = broadcast_pair(a[r]);
        left[r] = _mm512_dpbf16_ps(left[r], a_pair, b_left);
        right[r] = _mm512_dpbf16_ps(right[r], a_pair, b_right);
      }
    }
    store_rows(left, right, c, ldc, rows, cols, alpha, beta);
  }
};
#endif

}  // namespace ember::cpu::EMBER_CPU_KERNELS
