// bfloat16 products on AMX's tile registers (Intel Xeon from Sapphire Rapids on), in the blocked
// loops of core/cpu/kernels/packed_gemm.h: the packing the tiles load, and the micro-kernel.
//
// AMX adds eight tile registers of up to 16 rows of 64 bytes, and tdpbf16ps: c [16 x 16 float32]
// += a [16 x 32 bfloat16] b [32 x 16 bfloat16], b held as 16 rows of 16 pairs along k (the pairs
// of vdpbf16ps). One instruction is 8,192 multiply-adds, 16 times one vdpbf16ps on a 512-bit
// vector; on one core of a 2-core Xeon with AMX it ran at 3.4 TFLOP/s on operands in L2, where
// vdpbf16ps reaches about 0.2.
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
// an internal precision the instruction set leaves to the hardware. Measured on that Xeon: a
// single pair is summed exactly and rounded once before it is added to c; over more pairs no
// scalar model of float32 additions reproduces its bits. So no scalar reference holds it bit for
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
        // read along them and written down the strip.
        for (int64_t q = 0; 2 * q < depth; ++q) {
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
    PairFormat::pack_panel<kColumns>(b, depth, col0, cols, panel);
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
