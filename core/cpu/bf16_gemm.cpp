// The bfloat16 product (core/cpu/bf16_gemm.h), blocked as BLAS libraries block theirs:
//
//   for each block of kColumnBlock columns of b
//     for each slice of kDepth along k
//       pack that slice of b into panels of kColumns columns            (shared by the threads)
//       for each block of kRowBlock rows of a    (spread over the threads)
//         pack that block of a into strips of kRows rows                 (one buffer per thread)
//         for each panel, for each strip: the micro-kernel adds the strip times the panel into
//         a kRows x kColumns tile of c
//
// A panel (kDepth x 32 values, 16 KB) stays in the L1 cache while every strip of the row block
// (kRowBlock x kDepth, 96 KB, in L2) streams past it.
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

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#include "core/cpu/x86_intrinsics.h"
#endif

namespace ember::cpu {
namespace {

constexpr int64_t kRows = 12;            // rows of a tile: 12 x 2 float32 vectors of accumulators
constexpr int64_t kColumns = 32;         // columns of a tile: two vectors of 16 float32
constexpr int64_t kDepth = 256;          // k per slice (even: whole pairs)
constexpr int64_t kPairs = kDepth / 2;
constexpr int64_t kRowBlock = 16 * kRows;
constexpr int64_t kColumnBlock = 128 * kColumns;

// Below this many multiply-adds the product runs on one thread.
constexpr int64_t kMinWorkToShare = int64_t{1} << 18;

// Elements k = 2q and 2q + 1 of a row or column, as one word: the even one in the low half.
inline uint32_t pair_word(uint16_t even, uint16_t odd) {
  return static_cast<uint32_t>(even) | static_cast<uint32_t>(odd) << 16;
}

// Rows [row0, row0 + rows) and depth [depth0, depth0 + depth) of op(a), packed as strips of
// kRows rows (the last one zero-padded), each strip `pairs` words apart times kRows.
void pack_strips(const Bf16Operand& a, int64_t row0, int64_t rows, int64_t depth0, int64_t depth, int64_t pairs,
                 uint32_t* packed) {
  const int64_t strips = (rows + kRows - 1) / kRows;
  for (int64_t s = 0; s < strips; ++s) {
    uint32_t* strip = packed + s * pairs * kRows;
    const int64_t valid = std::min(kRows, rows - s * kRows);
    if (valid < kRows) std::fill(strip, strip + pairs * kRows, 0u);
    if (!a.transposed) {  // a row of op(a) is contiguous along k
      for (int64_t r = 0; r < valid; ++r) {
        const BFloat16* row = a.data + (row0 + s * kRows + r) * a.ld + depth0;
        for (int64_t q = 0; 2 * q + 1 < depth; ++q) strip[q * kRows + r] = pair_word(row[2 * q].bits, row[2 * q + 1].bits);
        if (depth % 2 == 1) strip[(pairs - 1) * kRows + r] = pair_word(row[depth - 1].bits, 0);
      }
    } else {  // a column of op(a) is contiguous: pair q joins two of them
      for (int64_t q = 0; q < pairs; ++q) {
        const BFloat16* even = a.data + (depth0 + 2 * q) * a.ld + row0 + s * kRows;
        const BFloat16* odd = 2 * q + 1 < depth ? even + a.ld : nullptr;
        for (int64_t r = 0; r < valid; ++r) strip[q * kRows + r] = pair_word(even[r].bits, odd ? odd[r].bits : 0);
      }
    }
  }
}

// Depth [depth0, depth0 + depth) and columns [col0, col0 + cols) of op(b), packed as panels of
// kColumns columns (the last one zero-padded), each `pairs` words apart times kColumns.
void pack_panel(const Bf16Operand& b, int64_t depth0, int64_t depth, int64_t pairs, int64_t col0, int64_t cols,
                uint32_t* panel) {
  if (cols < kColumns) std::fill(panel, panel + pairs * kColumns, 0u);
  if (!b.transposed) {  // a row of op(b) is contiguous along the columns: pair q joins two rows
    for (int64_t q = 0; q < pairs; ++q) {
      const BFloat16* even = b.data + (depth0 + 2 * q) * b.ld + col0;
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
      const BFloat16* column = b.data + (col0 + j) * b.ld + depth0;
      for (int64_t q = 0; 2 * q + 1 < depth; ++q) {
        panel[q * kColumns + j] = pair_word(column[2 * q].bits, column[2 * q + 1].bits);
      }
      if (depth % 2 == 1) panel[(pairs - 1) * kColumns + j] = pair_word(column[depth - 1].bits, 0);
    }
  }
}

// What a micro-kernel does: c[r][j] = beta c[r][j] + sum over q of strip pair q of row r times
// panel pair q of column j, for the r < rows and j < cols inside the matrix.
using MicroKernel = void (*)(int64_t pairs, const uint32_t* strip, const uint32_t* panel, float* c, int64_t ldc,
                             int64_t rows, int64_t cols, float beta);

// The instruction's arithmetic on one lane, written out: subnormal inputs and results are zero,
// and the high pair's product is added before the low one's, each sum rounded to float32 (the
// order vdpbf16ps specifies; measured the same on the AMD Zen 4 these machines have).
float flush_subnormal(float x) { return std::fabs(x) < FLT_MIN ? std::copysign(0.0f, x) : x; }

float bf16_half_as_float(uint32_t word, int shift) {
  return flush_subnormal(std::bit_cast<float>((word >> shift & 0xffffu) << 16));
}

void portable_micro_kernel(int64_t pairs, const uint32_t* strip, const uint32_t* panel, float* c, int64_t ldc,
                           int64_t rows, int64_t cols, float beta) {
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
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = beta == 0 ? tile[r][j] : std::fma(beta, c[r * ldc + j], tile[r][j]);
  }
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
// The tile in 24 registers; per pair of k, two loads of b, kRows broadcasts of a, 2 kRows
// vdpbf16ps. The loops over r unroll, so the accumulators never leave their registers.
void avx512_bf16_micro_kernel(int64_t pairs, const uint32_t* strip, const uint32_t* panel, float* c, int64_t ldc,
                              int64_t rows, int64_t cols, float beta) {
  __m512 left[kRows], right[kRows];
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) left[r] = right[r] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    const auto b_left = reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + q * kColumns));
    const auto b_right = reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + q * kColumns + 16));
    const uint32_t* a = strip + q * kRows;
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) {
      const auto a_pair = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a[r])));
      left[r] = _mm512_dpbf16_ps(left[r], a_pair, b_left);
      right[r] = _mm512_dpbf16_ps(right[r], a_pair, b_right);
    }
  }
  const auto left_mask = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const auto right_mask = static_cast<__mmask16>(cols >= 32 ? 0xffff : cols <= 16 ? 0 : (1u << (cols - 16)) - 1);
  const __m512 scale = _mm512_set1_ps(beta);
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    float* row = c + r * ldc;
    if (beta != 0) {  // masked loads: c past the edge is never read
      left[r] = _mm512_fmadd_ps(scale, _mm512_maskz_loadu_ps(left_mask, row), left[r]);
      right[r] = _mm512_fmadd_ps(scale, _mm512_maskz_loadu_ps(right_mask, row + 16), right[r]);
    }
    _mm512_mask_storeu_ps(row, left_mask, left[r]);
    _mm512_mask_storeu_ps(row + 16, right_mask, right[r]);
  }
}
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

void blocked_gemm(MicroKernel micro_kernel, int64_t m, int64_t n, int64_t k, const Bf16Operand& a,
                  const Bf16Operand& b, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
    }
    return;
  }
  const int threads = omp_in_parallel() || m * n * k < kMinWorkToShare ? 1 : omp_get_max_threads();
  const int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
  for (int64_t col0 = 0; col0 < n; col0 += kColumnBlock) {
    const int64_t cols = std::min(kColumnBlock, n - col0);
    const int64_t panels = (cols + kColumns - 1) / kColumns;
    // A few row blocks share their panels out between tasks, so every thread has work.
    const int64_t chunks = std::clamp<int64_t>((2 * threads + row_blocks - 1) / row_blocks, 1, panels);
    for (int64_t depth0 = 0; depth0 < k; depth0 += kDepth) {
      const int64_t depth = std::min(kDepth, k - depth0), pairs = (depth + 1) / 2;
      const float slice_beta = depth0 == 0 ? beta : 1.0f;  // later slices add to the first's sums
      uint32_t* const packed_panels = panels_scratch(panels * pairs * kColumns);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
      for (int64_t p = 0; p < panels; ++p) {
        pack_panel(b, depth0, depth, pairs, col0 + p * kColumns, std::min(kColumns, cols - p * kColumns),
                   packed_panels + p * pairs * kColumns);
      }
#pragma omp parallel num_threads(threads) if (threads > 1)
      {
        uint32_t* const strips = strips_scratch(kRowBlock * kPairs);
        int64_t packed_block = -1;
        // Static: a thread's tasks are consecutive, so its chunks of one row block share a packing.
#pragma omp for schedule(static)
        for (int64_t task = 0; task < row_blocks * chunks; ++task) {
          const int64_t block = task / chunks, chunk = task % chunks;
          const int64_t row0 = block * kRowBlock, rows = std::min(kRowBlock, m - row0);
          if (block != packed_block) {
            pack_strips(a, row0, rows, depth0, depth, pairs, strips);
            packed_block = block;
          }
          for (int64_t p = chunk * panels / chunks; p < (chunk + 1) * panels / chunks; ++p) {
            const int64_t first_col = col0 + p * kColumns;
            for (int64_t s = 0; s * kRows < rows; ++s) {
              micro_kernel(pairs, strips + s * pairs * kRows, packed_panels + p * pairs * kColumns,
                           c + (row0 + s * kRows) * ldc + first_col, ldc, std::min(kRows, rows - s * kRows),
                           std::min(kColumns, n - first_col), slice_beta);
            }
          }
        }
      }
    }
  }
}

}  // namespace

bool bf16_gemm_in_hardware() {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
  return true;
#else
  return false;
#endif
}

void bf16_gemm(int64_t m, int64_t n, int64_t k, Bf16Operand a, Bf16Operand b, float beta, float* c, int64_t ldc) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
  blocked_gemm(avx512_bf16_micro_kernel, m, n, k, a, b, beta, c, ldc);
#else
  blocked_gemm(portable_micro_kernel, m, n, k, a, b, beta, c, ldc);
#endif
}

void bf16_gemm_portable(int64_t m, int64_t n, int64_t k, Bf16Operand a, Bf16Operand b, float beta, float* c,
                        int64_t ldc) {
  blocked_gemm(portable_micro_kernel, m, n, k, a, b, beta, c, ldc);
}

}  // namespace ember::cpu
