// The blocked matrix product that ember's own CPU gemms share (core/cpu/bf16_gemm.cpp for
// bfloat16 on AVX512-BF16, core/cpu/float16_gemm.cpp for float16 on float32 FMAs), blocked as
// BLAS libraries block theirs:
//
//   for each block of columns of b
//     pack that block of b into panels of kColumns columns, over the whole depth k
//     for each block of rows of a
//       pack that block of a into strips of kRows rows
//       for each panel, for each strip: the micro-kernel computes a kRows x kColumns tile of c
//       from the strip and the panel, and stores it (rounded once, for a 16-bit c)
//
// What differs between the gemms is a Format: the operands' element type In, the packed Word
// (32 bits), how many steps along k one Word holds, how a strip and a panel are packed; and the
// Kernels that multiply them (a vector one, and a portable one written out in scalar C++ that
// the tests hold it to, bit for bit).
//
// Each tile's sums stay in registers over the whole depth, so c is written once: a 16-bit c is
// rounded as it is stored, and its old values (beta != 0, a bias linear put there) are read
// where they are added, with no float32 copy of c. (A depth past kMaxDepth, which the blocks
// below would not fit in cache, goes in slices through a float32 c; see deep_gemm.)
//
// Sizes: a block of rows is chosen to fill about 384 KB of the 1 MB L2 and a block of columns
// about 4 MB of L3; a panel (k x 32 values) is reused by every strip of the row block.
//
// Threads share a product by parts of c: each takes a band of rows (or of columns, for a product
// with few rows) and runs all of the loops above on its band, packing its own copy of the operand
// the bands share. That costs one extra packing per thread, and saves the barriers that threads
// working on shared packed blocks would need: on a machine whose cores are shared with other
// work, a thread waiting at a barrier for a descheduled one loses its time.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/cpu/half_rows.h"
#include "core/cpu/matrix_operand.h"
#include "core/half.h"

// The vector kernels and their store need AVX-512 F, BW (masked 16-bit moves) and VL (their
// 256-bit forms).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define EMBER_PACKED_GEMM_AVX512 1
#include "core/cpu/x86_intrinsics.h"
#endif

namespace ember::cpu {

namespace packed {

inline constexpr int64_t kRows = 12;     // rows of a tile: 12 x 2 float32 vectors of accumulators
inline constexpr int64_t kColumns = 32;  // columns of a tile: two vectors of 16 float32
inline constexpr int64_t kMaxRowBlock = 16 * kRows, kMaxColumnBlock = 128 * kColumns;
inline constexpr int64_t kRowBlockBytes = 384 << 10, kColumnBlockBytes = 4 << 20;
inline constexpr int64_t kMaxDepth = 8192;  // deeper products go in slices (even: whole pairs)

// Below this many multiply-adds a product runs on one thread.
inline constexpr int64_t kMinWorkToShare = int64_t{1} << 18;

// Rows of a per block, whole strips, about kRowBlockBytes of packed a (`words` 4-byte words a row).
inline int64_t row_block(int64_t words) {
  return std::clamp<int64_t>(kRowBlockBytes / (4 * words) / kRows * kRows, kRows, kMaxRowBlock);
}

// Columns of b per block, whole panels, about kColumnBlockBytes of packed b.
inline int64_t column_block(int64_t words) {
  return std::clamp<int64_t>(kColumnBlockBytes / (4 * words) / kColumns * kColumns, kColumns, kMaxColumnBlock);
}

// Scratch that persists per thread (and per Word type and use): packing buffers are reused from
// call to call, 64-byte aligned so a panel's vector loads never straddle cache lines.
template <class Word, int kUse>
Word* scratch(int64_t words) {
  constexpr int64_t kAlignWords = 64 / sizeof(Word);
  thread_local std::unique_ptr<Word[]> buffer;
  thread_local int64_t capacity = 0;
  if (capacity < words) {
    buffer = std::make_unique_for_overwrite<Word[]>(static_cast<size_t>(words + kAlignWords));
    capacity = words;
  }
  const auto address = reinterpret_cast<uintptr_t>(buffer.get());
  return buffer.get() + (kAlignWords - (address / sizeof(Word)) % kAlignWords) % kAlignWords;
}

// The portable kernels' store: c[r][j] = alpha tile[r][j] + beta c[r][j] for the r < rows and
// j < cols inside the matrix (beta = 0: c not read), rounded once into a 16-bit c, as the vector
// kernels' store_lanes do; with kFlushToBf16, a subnormal rounded to bfloat16 is zero first
// (vcvtneps2bf16 reads it so).
template <bool kFlushToBf16, class Out>
void store_tile(const float (&tile)[kRows][kColumns], Out* c, int64_t ldc, int64_t rows, int64_t cols, float alpha,
                float beta) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      Out& out = c[r * ldc + j];
      const float product = alpha == 1 ? tile[r][j] : alpha * tile[r][j];
      float value = beta == 0 ? product : std::fma(beta, static_cast<float>(out), product);
      if (kFlushToBf16 && std::is_same_v<Out, BFloat16> && std::fabs(value) < FLT_MIN) value = std::copysign(0.0f, value);
      out = static_cast<Out>(value);
    }
  }
}

#if defined(EMBER_PACKED_GEMM_AVX512)
// 16 lanes of c, loaded (masked: c past the edge is never read) as float32, and stored rounded
// once to c's type: the vector kernels' store.
inline __m512 load_lanes(const float* c, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, c); }
inline __m512 load_lanes(const BFloat16* c, __mmask16 mask) {  // bfloat16 widens exactly: 16 more bits
  const __m256i bits = _mm256_maskz_loadu_epi16(mask, c);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
inline __m512 load_lanes(const Float16* c, __mmask16 mask) {  // exact, as half.h's decoding is
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, c));
}
inline void store_lanes(float* c, __mmask16 mask, __m512 value) { _mm512_mask_storeu_ps(c, mask, value); }
#if defined(__AVX512BF16__)
inline void store_lanes(BFloat16* c, __mmask16 mask, __m512 value) {
  // vcvtneps2bf16 rounds to nearest even, as half.h does, NaNs stay (quiet) NaNs, and a subnormal
  // reads as zero.
  _mm256_mask_storeu_epi16(c, mask, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(value)));
}
#endif
inline void store_lanes(Float16* c, __mmask16 mask, __m512 value) {
  // IEEE rounding to nearest even, subnormals and NaNs as half.h rounds them.
  _mm256_mask_storeu_epi16(c, mask, _mm512_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// The vector kernels' store of a tile held as two vectors per row (left: columns 0-15, right:
// 16-31): alpha, beta c, the edges masked.
template <class Out>
inline void store_rows(__m512 (&left)[kRows], __m512 (&right)[kRows], Out* c, int64_t ldc, int64_t rows, int64_t cols,
                       float alpha, float beta) {
  const auto left_mask = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const auto right_mask = static_cast<__mmask16>(cols >= 32 ? 0xffff : cols <= 16 ? 0 : (1u << (cols - 16)) - 1);
  const __m512 scale = _mm512_set1_ps(alpha), old_scale = _mm512_set1_ps(beta);
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    Out* row = c + r * ldc;
    if (alpha != 1) {
      left[r] = _mm512_mul_ps(scale, left[r]);
      right[r] = _mm512_mul_ps(scale, right[r]);
    }
    if (beta != 0) {
      left[r] = _mm512_fmadd_ps(old_scale, load_lanes(row, left_mask), left[r]);
      right[r] = _mm512_fmadd_ps(old_scale, load_lanes(row + 16, right_mask), right[r]);
    }
    store_lanes(row, left_mask, left[r]);
    store_lanes(row + 16, right_mask, right[r]);
  }
}
#endif

// The product on the calling thread, k <= kMaxDepth: the loops of the header comment.
template <class Format, class Kernel, class Out>
void blocked_gemm(int64_t m, int64_t n, int64_t k, float alpha, const MatrixOperand<typename Format::In>& a,
                  const MatrixOperand<typename Format::In>& b, float beta, Out* c, int64_t ldc) {
  using Word = typename Format::Word;
  const int64_t words = (k + Format::kDepthPerWord - 1) / Format::kDepthPerWord;
  const int64_t max_rows = row_block(words), max_cols = column_block(words);
  Word* const strips = scratch<Word, 0>(max_rows * words);
  Word* const panels = scratch<Word, 1>(max_cols * words);
  for (int64_t col0 = 0; col0 < n; col0 += max_cols) {
    const int64_t cols = std::min(max_cols, n - col0), panel_count = (cols + kColumns - 1) / kColumns;
    for (int64_t p = 0; p < panel_count; ++p) {
      Format::pack_panel(b, k, col0 + p * kColumns, std::min(kColumns, cols - p * kColumns),
                         panels + p * words * kColumns);
    }
    for (int64_t row0 = 0; row0 < m; row0 += max_rows) {
      const int64_t rows = std::min(max_rows, m - row0);
      Format::pack_strips(a, row0, rows, k, strips);
      for (int64_t p = 0; p < panel_count; ++p) {
        const int64_t first_col = col0 + p * kColumns;
        for (int64_t s = 0; s * kRows < rows; ++s) {
          Kernel::run(words, strips + s * words * kRows, panels + p * words * kColumns,
                      c + (row0 + s * kRows) * ldc + first_col, ldc, std::min(kRows, rows - s * kRows),
                      std::min(kColumns, n - first_col), alpha, beta);
        }
      }
    }
  }
}

// Any depth, on the calling thread: slices of kMaxDepth, the later ones added to the first's sums
// in a float32 c (for a 16-bit c, a float32 copy rounded at the end).
template <class Format, class Kernel, class Out>
void deep_gemm(int64_t m, int64_t n, int64_t k, float alpha, const MatrixOperand<typename Format::In>& a,
               const MatrixOperand<typename Format::In>& b, float beta, Out* c, int64_t ldc) {
  if (k <= kMaxDepth) {
    blocked_gemm<Format, Kernel>(m, n, k, alpha, a, b, beta, c, ldc);
    return;
  }
  if constexpr (!std::is_same_v<Out, float>) {
    std::vector<float> sums(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m && beta != 0; ++i) widen_row(c + i * ldc, n, sums.data() + i * n);
    deep_gemm<Format, Kernel>(m, n, k, alpha, a, b, beta, sums.data(), n);
    for (int64_t i = 0; i < m; ++i) round_row(sums.data() + i * n, n, c + i * ldc);
  } else {
    for (int64_t depth0 = 0; depth0 < k; depth0 += kMaxDepth) {
      const int64_t depth = std::min(kMaxDepth, k - depth0);
      const MatrixOperand<typename Format::In> slice_of_a{a.transposed ? a.data + depth0 * a.ld : a.data + depth0,
                                                          a.ld, a.transposed};
      const MatrixOperand<typename Format::In> slice_of_b{b.transposed ? b.data + depth0 : b.data + depth0 * b.ld,
                                                          b.ld, b.transposed};
      blocked_gemm<Format, Kernel>(m, n, depth, alpha, slice_of_a, slice_of_b, depth0 == 0 ? beta : 1.0f, c, ldc);
    }
  }
}

// c = alpha op(a) op(b) + beta c on OpenMP's threads (one, inside a parallel region): split by
// rows when there are enough (each thread then packs all of b, which costs k n beside its
// m k n / threads multiply-adds), else by columns; each thread runs the whole blocked product on
// its part, with no barrier until the end.
template <class Format, class Kernel, class Out>
void shared_gemm(int64_t m, int64_t n, int64_t k, float alpha, const MatrixOperand<typename Format::In>& a,
                 const MatrixOperand<typename Format::In>& b, float beta, Out* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        c[i * ldc + j] = static_cast<Out>(beta == 0 ? 0.0f : beta * static_cast<float>(c[i * ldc + j]));
      }
    }
    return;
  }
  const int64_t threads = omp_in_parallel() || m * n * k < kMinWorkToShare ? 1 : omp_get_max_threads();
  if (threads == 1) {
    deep_gemm<Format, Kernel>(m, n, k, alpha, a, b, beta, c, ldc);
    return;
  }
  // Parts are whole tiles (kRows rows or kColumns columns) but the last.
  const bool by_rows = m >= threads * kMaxRowBlock || m >= n;
  const int64_t unit = by_rows ? kRows : kColumns, units = ((by_rows ? m : n) + unit - 1) / unit;
  const int64_t parts = std::min(threads, units);
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static)
  for (int64_t part = 0; part < parts; ++part) {
    const int64_t first = part * units / parts * unit;
    const int64_t last = std::min((part + 1) * units / parts * unit, by_rows ? m : n);
    if (by_rows) {
      const MatrixOperand<typename Format::In> rows_of_a{a.transposed ? a.data + first : a.data + first * a.ld, a.ld,
                                                         a.transposed};
      deep_gemm<Format, Kernel>(last - first, n, k, alpha, rows_of_a, b, beta, c + first * ldc, ldc);
    } else {
      const MatrixOperand<typename Format::In> columns_of_b{b.transposed ? b.data + first * b.ld : b.data + first,
                                                            b.ld, b.transposed};
      deep_gemm<Format, Kernel>(m, last - first, k, alpha, a, columns_of_b, beta, c + first, ldc);
    }
  }
}

}  // namespace packed
}  // namespace ember::cpu
