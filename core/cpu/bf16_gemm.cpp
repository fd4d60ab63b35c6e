// The bfloat16 product (core/cpu/bf16_gemm.h), blocked as BLAS libraries block theirs:
//
//   for each block of columns of b
//     pack that block of b into panels of kColumns columns, over the whole depth k
//     for each block of rows of a
//       pack that block of a into strips of kRows rows
//       for each panel, for each strip: the micro-kernel computes a kRows x kColumns tile of c
//       from the strip and the panel, and stores it (rounded once, for a bfloat16 c)
//
// Each tile's sums stay in registers over the whole depth, so c is written once: a bfloat16 c
// is rounded as it is stored, and its old values (beta != 0, a bias linear put there) are read
// where they are added, with no float32 copy of c. (A depth past kMaxDepth, which the blocks
// below would not fit in cache, goes in slices through a float32 c; see deep_gemm.)
//
// Sizes: a block of rows is chosen to fill about 384 KB of the 1 MB L2 (192 rows for k = 512, 48
// for k = 4096) and a block of columns about 4 MB of L3; a panel (k x 32 values) is reused by
// every strip of the row block. On one core of the AMD EPYC (Zen 4) these machines have, at
// 4096 x 512 x 512 this gives 195-205 GFLOP/s, and at 512 x 512 x 4096 184-189 (vdpbf16ps alone
// peaks at 234; OpenBLAS's sgemm gives 100 on either); on both cores, 439 GFLOP/s at
// 4096 x 512 x 512 (bench_matmul), against sgemm's 208.
//
// Threads share a product by parts of c: each takes a band of rows (or of columns, for a product
// with few rows) and runs all of the loops above on its band, packing its own copy of the operand
// the bands share. That costs one extra packing per thread, and saves the barriers that threads
// working on shared packed blocks would need: on a machine whose cores are shared with other
// work, a thread waiting at a barrier for a descheduled one loses its time.
//
// Packed layout: vdpbf16ps takes bfloat16 values in pairs along k: a 32-bit word holds elements
// k = 2q (low half) and 2q + 1 (high half). A strip of a is stored pair by pair, the kRows words
// of pair q side by side; a panel of b likewise, the kColumns words of pair q side by side. So
// for each pair the micro-kernel loads two vectors of 16 words of b and broadcasts one word of a
// per row. Rows, columns and pairs past the matrix are packed as zeros, so the micro-kernel
// always computes a whole tile and only its stores look at the edges; a zero pad of a meets a
// zero pad of b, never an infinity.
#include "core/cpu/bf16_gemm.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/cpu/half_rows.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#include "core/cpu/x86_intrinsics.h"
#endif

namespace ember::cpu {
namespace {

constexpr int64_t kRows = 12;     // rows of a tile: 12 x 2 float32 vectors of accumulators
constexpr int64_t kColumns = 32;  // columns of a tile: two vectors of 16 float32
constexpr int64_t kMaxRowBlock = 16 * kRows, kMaxColumnBlock = 128 * kColumns;
constexpr int64_t kRowBlockBytes = 384 << 10, kColumnBlockBytes = 4 << 20;
constexpr int64_t kMaxDepth = 8192;  // deeper products go in slices (even: whole pairs)

// Below this many multiply-adds the product runs on one thread.
constexpr int64_t kMinWorkToShare = int64_t{1} << 18;

// Rows of a per block: whole strips, about kRowBlockBytes of packed a.
int64_t row_block(int64_t depth) {
  return std::clamp<int64_t>(kRowBlockBytes / (2 * depth) / kRows * kRows, kRows, kMaxRowBlock);
}

// Columns of b per block: whole panels, about kColumnBlockBytes of packed b.
int64_t column_block(int64_t depth) {
  return std::clamp<int64_t>(kColumnBlockBytes / (2 * depth) / kColumns * kColumns, kColumns, kMaxColumnBlock);
}

// Elements k = 2q and 2q + 1 of a row or column, as one word: the even one in the low half.
inline uint32_t pair_word(uint16_t even, uint16_t odd) {
  return static_cast<uint32_t>(even) | static_cast<uint32_t>(odd) << 16;
}

// Rows [row0, row0 + rows) of op(a) [*, depth], packed as strips of kRows rows (the last one
// zero-padded), each strip pairs x kRows words.
void pack_strips(const Bf16Operand& a, int64_t row0, int64_t rows, int64_t depth, uint32_t* packed) {
  const int64_t pairs = (depth + 1) / 2;
  const int64_t strips = (rows + kRows - 1) / kRows;
  for (int64_t s = 0; s < strips; ++s) {
    uint32_t* strip = packed + s * pairs * kRows;
    const int64_t valid = std::min(kRows, rows - s * kRows);
    if (valid < kRows) std::fill(strip, strip + pairs * kRows, 0u);
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
void pack_panel(const Bf16Operand& b, int64_t depth, int64_t col0, int64_t cols, uint32_t* panel) {
  const int64_t pairs = (depth + 1) / 2;
  if (cols < kColumns) std::fill(panel, panel + pairs * kColumns, 0u);
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

// The micro-kernels. Each computes tile = the strip times the panel, then for the r < rows and
// j < cols inside the matrix stores c[r][j] = alpha tile[r][j] + beta c[r][j] (beta = 0: c not read),
// rounded once into a bfloat16 c. Out is float or BFloat16.

// The instruction's arithmetic on one lane, written out: subnormal inputs and results are zero,
// and the high pair's product is added before the low one's, each sum rounded to float32 (the
// order vdpbf16ps specifies; measured the same on the AMD Zen 4 these machines have).
float flush_subnormal(float x) { return std::fabs(x) < FLT_MIN ? std::copysign(0.0f, x) : x; }

float bf16_half_as_float(uint32_t word, int shift) {
  return flush_subnormal(std::bit_cast<float>((word >> shift & 0xffffu) << 16));
}

struct PortableKernel {
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
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) {
        Out& out = c[r * ldc + j];
        const float product = alpha == 1 ? tile[r][j] : alpha * tile[r][j];
        const float value = beta == 0 ? product : std::fma(beta, static_cast<float>(out), product);
        // Rounding to bfloat16 (vcvtneps2bf16) reads a subnormal as zero too.
        out = std::is_same_v<Out, BFloat16> ? static_cast<Out>(flush_subnormal(value)) : static_cast<Out>(value);
      }
    }
  }
};

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
// 16 lanes of c: loaded (masked: c past the edge is never read) as float32, and stored.
inline __m512 load_lanes(const float* c, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, c); }
inline __m512 load_lanes(const BFloat16* c, __mmask16 mask) {  // bfloat16 widens exactly: 16 more bits
  const __m256i bits = _mm256_maskz_loadu_epi16(mask, c);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
inline void store_lanes(float* c, __mmask16 mask, __m512 value) { _mm512_mask_storeu_ps(c, mask, value); }
inline void store_lanes(BFloat16* c, __mmask16 mask, __m512 value) {
  // vcvtneps2bf16 rounds to nearest even, as half.h does, NaNs stay (quiet) NaNs, and a subnormal
  // reads as zero.
  _mm256_mask_storeu_epi16(c, mask, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(value)));
}

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
struct Avx512Bf16Kernel {
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
};
#endif

// Scratch that persists per thread: packing buffers are reused from call to call, 64-byte
// aligned so a panel's vector loads never straddle cache lines.
uint32_t* scratch(std::unique_ptr<uint32_t[]>& buffer, int64_t& capacity, int64_t words) {
  constexpr int64_t kAlignWords = 16;
  if (capacity < words) {
    buffer = std::make_unique_for_overwrite<uint32_t[]>(static_cast<size_t>(words + kAlignWords));
    capacity = words;
  }
  const auto address = reinterpret_cast<uintptr_t>(buffer.get());
  return buffer.get() + (kAlignWords - (address / sizeof(uint32_t)) % kAlignWords) % kAlignWords;
}

uint32_t* panels_scratch(int64_t words) {
  thread_local std::unique_ptr<uint32_t[]> buffer;
  thread_local int64_t capacity = 0;
  return scratch(buffer, capacity, words);
}

uint32_t* strips_scratch(int64_t words) {
  thread_local std::unique_ptr<uint32_t[]> buffer;
  thread_local int64_t capacity = 0;
  return scratch(buffer, capacity, words);
}

// The product on the calling thread, k <= kMaxDepth: the loops of the file's header comment.
template <class Kernel, class Out>
void blocked_gemm(int64_t m, int64_t n, int64_t k, float alpha, const Bf16Operand& a, const Bf16Operand& b, float beta,
                  Out* c,
                  int64_t ldc) {
  const int64_t pairs = (k + 1) / 2;
  const int64_t max_rows = row_block(k), max_cols = column_block(k);
  uint32_t* const strips = strips_scratch(max_rows * pairs);
  uint32_t* const panels = panels_scratch(max_cols * pairs);
  for (int64_t col0 = 0; col0 < n; col0 += max_cols) {
    const int64_t cols = std::min(max_cols, n - col0), panel_count = (cols + kColumns - 1) / kColumns;
    for (int64_t p = 0; p < panel_count; ++p) {
      pack_panel(b, k, col0 + p * kColumns, std::min(kColumns, cols - p * kColumns), panels + p * pairs * kColumns);
    }
    for (int64_t row0 = 0; row0 < m; row0 += max_rows) {
      const int64_t rows = std::min(max_rows, m - row0);
      pack_strips(a, row0, rows, k, strips);
      for (int64_t p = 0; p < panel_count; ++p) {
        const int64_t first_col = col0 + p * kColumns;
        for (int64_t s = 0; s * kRows < rows; ++s) {
          Kernel::run(pairs, strips + s * pairs * kRows, panels + p * pairs * kColumns,
                      c + (row0 + s * kRows) * ldc + first_col, ldc, std::min(kRows, rows - s * kRows),
                      std::min(kColumns, n - first_col), alpha, beta);
        }
      }
    }
  }
}

// Any depth, on the calling thread: slices of kMaxDepth, the later ones added to the first's sums
// in a float32 c (for a bfloat16 c, a float32 copy rounded at the end).
template <class Kernel, class Out>
void deep_gemm(int64_t m, int64_t n, int64_t k, float alpha, const Bf16Operand& a, const Bf16Operand& b, float beta,
               Out* c,
               int64_t ldc) {
  if (k <= kMaxDepth) {
    blocked_gemm<Kernel>(m, n, k, alpha, a, b, beta, c, ldc);
    return;
  }
  if constexpr (std::is_same_v<Out, BFloat16>) {
    std::vector<float> sums(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m && beta != 0; ++i) widen_row(c + i * ldc, n, sums.data() + i * n);
    deep_gemm<Kernel>(m, n, k, alpha, a, b, beta, sums.data(), n);
    for (int64_t i = 0; i < m; ++i) round_row(sums.data() + i * n, n, c + i * ldc);
  } else {
    for (int64_t depth0 = 0; depth0 < k; depth0 += kMaxDepth) {
      const int64_t depth = std::min(kMaxDepth, k - depth0);
      const Bf16Operand slice_of_a{a.transposed ? a.data + depth0 * a.ld : a.data + depth0, a.ld, a.transposed};
      const Bf16Operand slice_of_b{b.transposed ? b.data + depth0 : b.data + depth0 * b.ld, b.ld, b.transposed};
      blocked_gemm<Kernel>(m, n, depth, alpha, slice_of_a, slice_of_b, depth0 == 0 ? beta : 1.0f, c, ldc);
    }
  }
}

// c's rows [first, last) of op(a) op(b), or its columns: the part of the product one thread does.
// Splits the product between the threads: by rows when there are enough (each thread then packs
// all of b, which costs k n beside its m k n / threads multiply-adds), else by columns. Each
// thread runs the whole blocked product on its part, with no barrier until the end.
template <class Kernel, class Out>
void shared_gemm(int64_t m, int64_t n, int64_t k, float alpha, const Bf16Operand& a, const Bf16Operand& b, float beta,
                 Out* c,
                 int64_t ldc) {
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
    deep_gemm<Kernel>(m, n, k, alpha, a, b, beta, c, ldc);
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
      const Bf16Operand rows_of_a{a.transposed ? a.data + first : a.data + first * a.ld, a.ld, a.transposed};
      deep_gemm<Kernel>(last - first, n, k, alpha, rows_of_a, b, beta, c + first * ldc, ldc);
    } else {
      const Bf16Operand columns_of_b{b.transposed ? b.data + first * b.ld : b.data + first, b.ld, b.transposed};
      deep_gemm<Kernel>(m, last - first, k, alpha, a, columns_of_b, beta, c + first, ldc);
    }
  }
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
using FastestKernel = Avx512Bf16Kernel;
#else
using FastestKernel = PortableKernel;
#endif

}  // namespace

bool bf16_gemm_in_hardware() { return !std::is_same_v<FastestKernel, PortableKernel>; }

template <class Out>
void bf16_gemm(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b, float beta, Out* c,
               int64_t ldc) {
  shared_gemm<FastestKernel>(m, n, k, alpha, a, b, beta, c, ldc);
}

template <class Out>
void bf16_gemm_portable(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b, float beta,
                        Out* c, int64_t ldc) {
  shared_gemm<PortableKernel>(m, n, k, alpha, a, b, beta, c, ldc);
}

template void bf16_gemm(int64_t, int64_t, int64_t, float, Bf16Operand, Bf16Operand, float, float*, int64_t);
template void bf16_gemm(int64_t, int64_t, int64_t, float, Bf16Operand, Bf16Operand, float, BFloat16*, int64_t);
template void bf16_gemm_portable(int64_t, int64_t, int64_t, float, Bf16Operand, Bf16Operand, float, float*, int64_t);
template void bf16_gemm_portable(int64_t, int64_t, int64_t, float, Bf16Operand, Bf16Operand, float, BFloat16*,
                                 int64_t);

}  // namespace ember::cpu
