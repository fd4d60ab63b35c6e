// The blocked matrix product that ember's own CPU gemms share (core/cpu/bf16_gemm.h,
// core/cpu/float16_gemm.h), blocked as BLAS libraries block theirs:
//
//   for each block of columns of b
//     pack that block of b into panels of Kernel::kColumns columns, over the whole depth k
//     for each block of rows of a
//       pack that block of a into strips of Kernel::kRows rows
//       for each panel, for each strip: the micro-kernel computes a kRows x kColumns tile of c
//       from the strip and the panel, and stores it (rounded once, for a 16-bit c)
//
// What differs between the gemms is a Format: the operands' element type In, the packed Word
// (32 bits), how many steps along k one Word holds, how a strip and a panel are packed; and the
// Kernel that multiplies them, which sets the tile's shape to fit its registers (12 x 32 in
// AVX-512's 32 registers, 6 x 16 in AVX2's 16). Each Format has a portable kernel written out in
// scalar C++ that the tests hold the vector ones to, bit for bit.
//
// Each tile's sums stay in registers over the whole depth, so c is written once: a 16-bit c is
// rounded as it is stored, and its old values (beta != 0, a bias linear put there) are read
// where they are added, with no float32 copy of c. (Deep products go in slices of depth, each
// added to a float32 c, which keeps the operands the kernel reads in L1 and L2; a 16-bit c then
// goes through float32 sums rounded at the end; see deep_gemm.)
//
// Sizes: a block of rows is chosen to fill about 384 KB of a 1 MB L2 and a block of columns
// about 4 MB of L3; a panel (k x kColumns values) is reused by every strip of the row block.
//
// Threads share a product by parts of c: each takes a band of rows (or of columns, for a product
// with few rows) and runs all of the loops above on its band, packing its own copy of the operand
// the bands share. That costs one extra packing per thread, and saves the barriers that threads
// working on shared packed blocks would need: on a machine whose cores are shared with other
// work, a thread waiting at a barrier for a descheduled one loses its time.
#pragma once

#include <omp.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cpu/kernel_table.h"
#include "core/cpu/kernels/rung_namespace.h"
#include "core/cpu/matrix_operand.h"
#include "core/half.h"

namespace ember::cpu::EMBER_CPU_KERNELS {
namespace packed {

inline constexpr int64_t kRowBlockBytes = 384 << 10, kColumnBlockBytes = 4 << 20;
// Deep products go in slices of kSliceDepth, each slice's sums added to c in float32: a slice's
// strip and panel then stay in L1 and L2 while the micro-kernel reads them, where a panel of the
// whole depth would be read from further out. Measured on an AVX2 machine (2 cores, 32 KB L1,
// 512 KB L2): the bfloat16 step of benchmarks/side_by_side's classifier, whose weight gradients
// are products of depth 4096, took 7% less time with slices of 512 than with the whole depth; up
// to a depth of 1024 the whole depth was about as fast. (Even sizes: whole pairs of the pair
// formats.)
inline constexpr int64_t kWholeDepth = 1024, kSliceDepth = 512;

// Below this many multiply-adds a product runs on one thread.
inline constexpr int64_t kMinWorkToShare = int64_t{1} << 18;

// The scratch slots of thread_scratch (core/cpu/kernel_table.h) that the packing uses.
enum ScratchSlot : int { kStrips = 0, kPanels = 1, kWidenedLine = 2 };

// Rows of a per block, whole strips, about kRowBlockBytes of packed a (`words` 4-byte words a row).
template <class Kernel>
int64_t row_block(int64_t words) {
  const int64_t whole_strips = kRowBlockBytes / (4 * words) / Kernel::kRows * Kernel::kRows;
  return smaller(larger(whole_strips, Kernel::kRows), 16 * Kernel::kRows);
}

// Columns of b per block, whole panels, about kColumnBlockBytes of packed b.
template <class Kernel>
int64_t column_block(int64_t words) {
  const int64_t whole_panels = kColumnBlockBytes / (4 * words) / Kernel::kColumns * Kernel::kColumns;
  return smaller(larger(whole_panels, Kernel::kColumns), 128 * Kernel::kColumns);
}

// The words a strip's row or a panel's column holds for `depth`: whole words of the format, and
// for a format whose kernel reads the depth in blocks of kWordBlock words (AMX's tiles), whole
// blocks.
template <class Format>
constexpr int64_t packed_words(int64_t depth) {
  const int64_t words = (depth + Format::kDepthPerWord - 1) / Format::kDepthPerWord;
  if constexpr (requires { Format::kWordBlock; }) {
    return (words + Format::kWordBlock - 1) / Format::kWordBlock * Format::kWordBlock;
  } else {
    return words;
  }
}

// The portable kernels' store: c[r][j] = alpha tile[r][j] + beta c[r][j] for the r < rows and
// j < cols inside the matrix (beta = 0: c not read), rounded once into a 16-bit c, as the vector
// kernels' stores do; with kFlushToBf16, a subnormal rounded to bfloat16 is zero first
// (vcvtneps2bf16 reads it so).
template <bool kFlushToBf16, int64_t kRows, int64_t kColumns, class Out>
void store_tile(const float (&tile)[kRows][kColumns], Out* c, int64_t ldc, int64_t rows, int64_t cols, float alpha,
                float beta) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      Out& out = c[r * ldc + j];
      const float product = alpha == 1 ? tile[r][j] : alpha * tile[r][j];
      float value = beta == 0 ? product : std::fma(beta, static_cast<float>(out), product);
      if (kFlushToBf16 && std::is_same_v<Out, BFloat16> && std::fabs(value) < FLT_MIN) value = std::copysign(0.0f, value);
      if constexpr (std::is_same_v<Out, float>) {
        out = value;
      } else if constexpr (std::is_same_v<Out, BFloat16>) {
        out.bits = half_bits::from_float_to_bfloat16(value);
      } else {
        out.bits = half_bits::from_float_to_float16(value);
      }
    }
  }
}

// The product on the calling thread, over the whole depth k: the loops of the header comment.
template <class Format, class Kernel, class Out>
void blocked_gemm(int64_t m, int64_t n, int64_t k, float alpha, const MatrixOperand<typename Format::In>& a,
                  const MatrixOperand<typename Format::In>& b, float beta, Out* c, int64_t ldc) {
  using Word = typename Format::Word;
  constexpr int64_t kRows = Kernel::kRows, kColumns = Kernel::kColumns;
  const int64_t words = packed_words<Format>(k);
  const int64_t max_rows = row_block<Kernel>(words), max_cols = column_block<Kernel>(words);
  auto* const strips = static_cast<Word*>(thread_scratch(kStrips, max_rows * words * 4));
  auto* const panels = static_cast<Word*>(thread_scratch(kPanels, max_cols * words * 4));
  // A kernel on registers the thread must set up first (AMX's tiles) sets them up here, once per
  // product on each thread, and lets them go at the end.
  if constexpr (requires { Kernel::configure(); }) Kernel::configure();
  for (int64_t col0 = 0; col0 < n; col0 += max_cols) {
    const int64_t cols = smaller(max_cols, n - col0), panel_count = (cols + kColumns - 1) / kColumns;
    for (int64_t p = 0; p < panel_count; ++p) {
      Format::template pack_panel<kColumns>(b, k, col0 + p * kColumns, smaller(kColumns, cols - p * kColumns),
                                            panels + p * words * kColumns);
    }
    for (int64_t row0 = 0; row0 < m; row0 += max_rows) {
      const int64_t rows = smaller(max_rows, m - row0);
      Format::template pack_strips<kRows>(a, row0, rows, k, strips);
      for (int64_t p = 0; p < panel_count; ++p) {
        const int64_t first_col = col0 + p * kColumns;
        for (int64_t s = 0; s * kRows < rows; ++s) {
          Kernel::run(words, strips + s * words * kRows, panels + p * words * kColumns,
                      c + (row0 + s * kRows) * ldc + first_col, ldc, smaller(kRows, rows - s * kRows),
                      smaller(kColumns, n - first_col), alpha, beta);
        }
      }
    }
  }
  if constexpr (requires { Kernel::release(); }) Kernel::release();
}

// Any depth, on the calling thread. Up to kWholeDepth, in one pass (a 16-bit c rounded once as
// it is stored). Deeper, in slices of kSliceDepth, the later slices' sums added to the earlier
// ones' in a float32 c: c itself, or for a 16-bit c float32 sums rounded into it at the end (the
// same bits as the float32 product, rounded once).
template <class Format, class Kernel, class Out>
void deep_gemm(int64_t m, int64_t n, int64_t k, float alpha, const MatrixOperand<typename Format::In>& a,
               const MatrixOperand<typename Format::In>& b, float beta, Out* c, int64_t ldc) {
  if (k <= kWholeDepth) {
    blocked_gemm<Format, Kernel>(m, n, k, alpha, a, b, beta, c, ldc);
  } else if constexpr (std::is_same_v<Out, float>) {
    for (int64_t depth0 = 0; depth0 < k; depth0 += kSliceDepth) {
      const int64_t depth = smaller(kSliceDepth, k - depth0);
      const MatrixOperand<typename Format::In> slice_of_a{a.transposed ? a.data + depth0 * a.ld : a.data + depth0,
                                                          a.ld, a.transposed};
      const MatrixOperand<typename Format::In> slice_of_b{b.transposed ? b.data + depth0 : b.data + depth0 * b.ld,
                                                          b.ld, b.transposed};
      blocked_gemm<Format, Kernel>(m, n, depth, alpha, slice_of_a, slice_of_b, depth0 == 0 ? beta : 1.0f, c, ldc);
    }
  } else {
    float* const sums = new float[static_cast<size_t>(m * n)];
    for (int64_t i = 0; i < m && beta != 0; ++i) {
      for (int64_t j = 0; j < n; ++j) sums[i * n + j] = static_cast<float>(c[i * ldc + j]);
    }
    deep_gemm<Format, Kernel>(m, n, k, alpha, a, b, beta, sums, n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        if constexpr (std::is_same_v<Out, BFloat16>) {
          c[i * ldc + j].bits = half_bits::from_float_to_bfloat16(sums[i * n + j]);
        } else {
          c[i * ldc + j].bits = half_bits::from_float_to_float16(sums[i * n + j]);
        }
      }
    }
    delete[] sums;
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
        const float value = beta == 0 ? 0.0f : beta * static_cast<float>(c[i * ldc + j]);
        if constexpr (std::is_same_v<Out, float>) {
          c[i * ldc + j] = value;
        } else if constexpr (std::is_same_v<Out, BFloat16>) {
          c[i * ldc + j].bits = half_bits::from_float_to_bfloat16(value);
        } else {
          c[i * ldc + j].bits = half_bits::from_float_to_float16(value);
        }
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
  const bool by_rows = m >= threads * 16 * Kernel::kRows || m >= n;
  const int64_t unit = by_rows ? Kernel::kRows : Kernel::kColumns, units = ((by_rows ? m : n) + unit - 1) / unit;
  const int64_t parts = smaller(threads, units);
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static)
  for (int64_t part = 0; part < parts; ++part) {
    const int64_t first = part * units / parts * unit;
    const int64_t last = smaller((part + 1) * units / parts * unit, by_rows ? m : n);
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
}  // namespace ember::cpu::EMBER_CPU_KERNELS
