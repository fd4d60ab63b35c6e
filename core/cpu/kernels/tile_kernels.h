// bfloat16 products on AMX's tile registers (Intel Xeon from Sapphire Rapids on), in the blocked
// loops of core/cpu/kernels/packed_gemm.h: the packing the tiles load, and the micro-kernel.
//
// AMX adds eight tile registers of up to 16 rows of 64 bytes, and tdpbf16ps: c [16 x 16 float32]
// += a [16 x 32 bfloat16] b [32 x 16 bfloat16], b held as 16 rows of 16 pairs along k (the pairs
// of vdpbf16ps). One instruction is 8,192 multiply-adds, where a vdpbf16ps on a 512-bit vector
// is 32; on one core of a 2-core Xeon with AMX, a loop of them ran at 3.4 TFLOP/s on operands in
// L2, where ember's vdpbf16ps kernel reaches about 0.1 a core.
//
// Packed layout:
// - a strip of a is kRows rows one after another, each row its pairs along k in order, so a tile
//   loads 16 rows of 16 pairs with the row's length as its stride;
// - a panel of b is laid out as for vdpbf16ps (core/cpu/kernels/pair_kernels.h): the kColumns
//   words of pair q side by side, so a tile loads 16 pairs of 16 of those columns.
// Both are padded with zero pairs to whole blocks of 16 pairs (kWordBlock), and past the matrix's
// rows and columns with zeros, as the pair format pads.
//
// The arithmetic: every product of two bfloat16 values is exact in float32, subnormal inputs and
// results count as zero (as for vdpbf16ps), and tdpbf16ps adds the products in an order and at
// an internal precision the instruction set leaves to the hardware. Measured on that Xeon: the
// two products of a single pair are summed and rounded once, then added to c; over more pairs no
// scalar model of float32 additions reproduced its bits. So no scalar reference holds it bit for
// bit; the tests hold it to float32's summation bound, as they hold every rung, and to the same
// bits from run to run and from one thread to several.
#pragma once

#include <cstdint>

#include "core/cpu/kernels/fma_kernels.h"
#include "core/cpu/kernels/packed_gemm.h"
#include "core/cpu/kernels/pair_kernels.h"
#include "core/cpu/kernels/rung_namespace.h"
#include "core/cpu/matrix_operand.h"
#include "core/half.h"

namespace ember::cpu::EMBER_CPU_KERNELS {

#if defined(__AVX512F__) && defined(__AVX512BW__)
// The 16 x 16 words of v transposed in place: afterwards v[j] holds word j of each of the 16
// vectors that came in. Three rounds of shuffles (words within 128-bit lanes, then pairs of
// words, then the lanes themselves), 64 instructions for 256 words.
inline void transpose_words(__m512i (&v)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  // Per 128-bit lane L: v[4g + c] gets word 4L + c of vectors 4g ... 4g + 3.
  for (int i = 0; i < 16; i += 4) {
    v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // Gather lane L of v[c], v[4 + c], v[8 + c], v[12 + c] into word group 4L + c's vector.
  __m512i out[16];
  for (int c = 0; c < 4; ++c) {
    const __m512i even_lanes_low = _mm512_shuffle_i32x4(v[c], v[4 + c], 0x88);
    const __m512i odd_lanes_low = _mm512_shuffle_i32x4(v[c], v[4 + c], 0xdd);
    const __m512i even_lanes_high = _mm512_shuffle_i32x4(v[8 + c], v[12 + c], 0x88);
    const __m512i odd_lanes_high = _mm512_shuffle_i32x4(v[8 + c], v[12 + c], 0xdd);
    out[c] = _mm512_shuffle_i32x4(even_lanes_low, even_lanes_high, 0x88);
    out[8 + c] = _mm512_shuffle_i32x4(even_lanes_low, even_lanes_high, 0xdd);
    out[4 + c] = _mm512_shuffle_i32x4(odd_lanes_low, odd_lanes_high, 0x88);
    out[12 + c] = _mm512_shuffle_i32x4(odd_lanes_low, odd_lanes_high, 0xdd);
  }
  for (int i = 0; i < 16; ++i) v[i] = out[i];
}

// 16 pairs of two 16-value lines of bfloat16: word r is (even[r], odd[r]).
inline __m512i pair_words(const BFloat16* even, const BFloat16* odd) {
  const __m512i low = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even)));
  const __m512i high = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(odd)));
  return _mm512_or_si512(low, _mm512_slli_epi32(high, 16));
}
#endif

struct TileFormat {
  using In = BFloat16;
  using Word = uint32_t;
  static constexpr int64_t kDepthPerWord = 2;
  // A tile row holds 16 pairs: the depth is packed in whole blocks of them.
  static constexpr int64_t kWordBlock = 16;

  // Rows [row0, row0 + rows) of op(a) [*, depth], as strips of kRows rows of `pairs` words each
  // (packed::packed_words: depth's pairs rounded up to a block), zero past the matrix.
  template <int64_t kRows>
  static void pack_strips(const MatrixOperand<BFloat16>& a, int64_t row0, int64_t rows, int64_t depth,
                          uint32_t* packed) {
    const int64_t pairs = packed::packed_words<TileFormat>(depth);
    const int64_t strips = (rows + kRows - 1) / kRows;
    for (int64_t s = 0; s < strips; ++s) {
      uint32_t* strip = packed + s * pairs * kRows;
      const int64_t valid = smaller(kRows, rows - s * kRows), first = row0 + s * kRows;
      if (!a.transposed) {
        // A row of op(a) is contiguous along k, pairs already side by side: the packed row is the
        // row itself, then zeros.
        for (int64_t r = 0; r < valid; ++r) {
          const BFloat16* row = a.data + (first + r) * a.ld;
          auto* halves = reinterpret_cast<uint16_t*>(strip + r * pairs);
          for (int64_t p = 0; p < depth; ++p) halves[p] = row[p].bits;
          for (int64_t p = depth; p < 2 * pairs; ++p) halves[p] = 0;
        }
      } else {
        // A column of op(a) is contiguous: pair q joins rows 2q and 2q + 1 of the stored matrix,
        // read along them and written down the strip; whole blocks of 16 rows x 16 pairs as 16
        // vectors of pairs, transposed, the rest one word at a time.
        int64_t q_done = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
        const int64_t whole_pairs = depth / 2 / 16 * 16, whole_rows = valid / 16 * 16;
        for (int64_t q0 = 0; q0 < whole_pairs; q0 += 16) {
          for (int64_t r0 = 0; r0 < whole_rows; r0 += 16) {
            __m512i words[16];
            for (int i = 0; i < 16; ++i) {
              const BFloat16* even = a.data + 2 * (q0 + i) * a.ld + first + r0;
              words[i] = pair_words(even, even + a.ld);
            }
            transpose_words(words);
            for (int r = 0; r < 16; ++r) _mm512_storeu_si512(strip + (r0 + r) * pairs + q0, words[r]);
          }
          for (int64_t q = q0; q < q0 + 16; ++q) {
            const BFloat16* even = a.data + 2 * q * a.ld + first;
            const BFloat16* odd = even + a.ld;
            for (int64_t r = whole_rows; r < valid; ++r) strip[r * pairs + q] = pair_word(even[r].bits, odd[r].bits);
          }
        }
        q_done = whole_pairs;
#endif
        for (int64_t q = q_done; 2 * q < depth; ++q) {
          const BFloat16* even = a.data + 2 * q * a.ld + first;
          const BFloat16* odd = 2 * q + 1 < depth ? even + a.ld : nullptr;
          for (int64_t r = 0; r < valid; ++r) strip[r * pairs + q] = pair_word(even[r].bits, odd ? odd[r].bits : 0);
        }
        for (int64_t r = 0; r < valid; ++r) fill(strip + r * pairs + (depth + 1) / 2, pairs - (depth + 1) / 2, 0u);
      }
      fill(strip + valid * pairs, (kRows - valid) * pairs, 0u);
    }
  }

  // Columns [col0, col0 + cols) of op(b) [depth, *], cols <= kColumns: the pair format's panel,
  // then zero pairs to a whole block.
  template <int64_t kColumns>
  static void pack_panel(const MatrixOperand<BFloat16>& b, int64_t depth, int64_t col0, int64_t cols,
                         uint32_t* panel) {
    const int64_t pairs = (depth + 1) / 2;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    if (b.transposed && cols == kColumns && kColumns % 16 == 0) {
      // A column of op(b) is contiguous along k, its pairs already words: 16 columns' words of a
      // block of 16 pairs, loaded as 16 vectors and transposed into the panel's rows; the last,
      // partial block one word at a time.
      const int64_t whole_pairs = depth / 2 / 16 * 16;
      for (int64_t q0 = 0; q0 < whole_pairs; q0 += 16) {
        for (int64_t j0 = 0; j0 < kColumns; j0 += 16) {
          __m512i words[16];
          for (int j = 0; j < 16; ++j) {
            words[j] = _mm512_loadu_si512(b.data + (col0 + j0 + j) * b.ld + 2 * q0);
          }
          transpose_words(words);
          for (int i = 0; i < 16; ++i) _mm512_storeu_si512(panel + (q0 + i) * kColumns + j0, words[i]);
        }
      }
      for (int64_t j = 0; j < kColumns; ++j) {
        const BFloat16* column = b.data + (col0 + j) * b.ld;
        for (int64_t q = whole_pairs; 2 * q + 1 < depth; ++q) {
          panel[q * kColumns + j] = pair_word(column[2 * q].bits, column[2 * q + 1].bits);
        }
        if (depth % 2 == 1) panel[(pairs - 1) * kColumns + j] = pair_word(column[depth - 1].bits, 0);
      }
    } else {
      PairFormat::pack_panel<kColumns>(b, depth, col0, cols, panel);
    }
#else
    PairFormat::pack_panel<kColumns>(b, depth, col0, cols, panel);
#endif
    fill(panel + pairs * kColumns, (packed::packed_words<TileFormat>(depth) - pairs) * kColumns, 0u);
  }
};

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__) && defined(__AVX512BF16__)
// c's 32 x 32 tile in tile registers 0-3 (rows 0-15 and 16-31, columns 0-15 and 16-31), a's two
// row blocks in 4 and 5, b's two column blocks in 6 and 7: per block of 16 pairs, four loads and
// four tdpbf16ps, each tile of a and of b used twice.
struct AmxTileKernel {
  static constexpr int64_t kRows = 32, kColumns = 32;

  // The tiles' shapes (ldtilecfg's 64-byte operand): palette 1, all eight 16 rows x 64 bytes.
  // Loaded by each thread before its products and released after (the operating system then
  // needs not save 8 KB of tile state when it switches the thread out).
  struct alignas(64) TileShapes {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
  };
  static void configure() {
    const TileShapes shapes;
    _tile_loadconfig(&shapes);
  }
  static void release() { _tile_release(); }

  template <class Out>
  static void run(int64_t pairs, const uint32_t* strip, const uint32_t* panel, Out* c, int64_t ldc, int64_t rows,
                  int64_t cols, float alpha, float beta) {
    constexpr int64_t kPanelStride = kColumns * 4;
    const int64_t strip_stride = pairs * 4;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t q = 0; q < pairs; q += TileFormat::kWordBlock) {
      _tile_loadd(4, strip + q, strip_stride);
      _tile_loadd(5, strip + 16 * pairs + q, strip_stride);
      _tile_loadd(6, panel + q * kColumns, kPanelStride);
      _tile_loadd(7, panel + q * kColumns + 16, kPanelStride);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    // Through the stack into the AVX-512 kernels' store (alpha, beta c, rounding, the edges).
    alignas(64) float sums[kRows][kColumns];
    _tile_stored(0, &sums[0][0], kPanelStride);
    _tile_stored(1, &sums[0][16], kPanelStride);
    _tile_stored(2, &sums[16][0], kPanelStride);
    _tile_stored(3, &sums[16][16], kPanelStride);
    __m512 left[kRows], right[kRows];
    for (int r = 0; r < kRows; ++r) {
      left[r] = _mm512_load_ps(sums[r]);
      right[r] = _mm512_load_ps(sums[r] + 16);
    }
    store_rows(left, right, c, ldc, rows, cols, alpha, beta);
  }
};
#endif

}  // namespace ember::cpu::EMBER_CPU_KERNELS
