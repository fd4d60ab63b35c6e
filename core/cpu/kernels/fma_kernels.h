// The float32 micro-kernels of core/cpu/kernels/packed_gemm.h, on operands packed by
// core/cpu/kernels/widened_format.h: each computes a tile of c as chains of fused multiply-adds
// in k's order, then stores c[r][j] = alpha tile[r][j] + beta c[r][j] for the r < rows and
// j < cols inside the matrix (beta = 0: c not read), rounded once into a 16-bit c. Every kernel
// rounds exactly as std::fma does at each step, so all of them give the same bits as the portable
// one, which the tests hold them to.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cpu/kernels/packed_gemm.h"
#include "core/cpu/kernels/rung_namespace.h"
#include "core/half.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include "core/cpu/x86_intrinsics.h"
#endif

namespace ember::cpu::EMBER_CPU_KERNELS {

// Scalar C++ with std::fma: the reference, and the kernel where no vector one is compiled.
template <int64_t kTileRows, int64_t kTileColumns>
struct PortableFmaKernel {
  static constexpr int64_t kRows = kTileRows, kColumns = kTileColumns;
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

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// 8 lanes of a 16-bit or float32 c, widened exactly; and 8 float32 lanes rounded once to c's
// type (round to nearest even, NaNs kept quiet, as half.h rounds).
inline __m256 load8(const float* c) { return _mm256_loadu_ps(c); }
inline __m256 load8(const Float16* c) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))); }
inline __m256 load8(const BFloat16* c) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
inline void store8(float* c, __m256 value) { _mm256_storeu_ps(c, value); }
inline void store8(Float16* c, __m256 value) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(c), _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void store8(BFloat16* c, __m256 value) {
  // half_bits::from_float_to_bfloat16 on 8 lanes: add 0x7fff plus the kept part's lowest bit and
  // keep the top 16 bits; a NaN keeps its top bits with the quiet bit set.
  const __m256i bits = _mm256_castps_si256(value);
  const __m256i lowest_kept = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lowest_kept)), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(value, value, _CMP_UNORD_Q));
  const __m256i halves = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
  // Two 32-bit lanes per 64 bits hold the 16-bit results in their low halves: pack them, then
  // bring the two 128-bit halves' results together.
  const __m256i packed = _mm256_packus_epi32(halves, halves);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(c),
                   _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0b1000)));
}

// The tile of 6 rows x 16 columns in 12 of AVX2's 16 registers; per k, two loads of b, 6
// broadcasts of a, 12 FMAs. The loops over r unroll, so the sums never leave their registers.
struct Avx2FmaKernel {
  static constexpr int64_t kRows = 6, kColumns = 16;
  template <class Out>
  static void run(int64_t depth, const float* strip, const float* panel, Out* c, int64_t ldc, int64_t rows,
                  int64_t cols, float alpha, float beta) {
    __m256 left[kRows], right[kRows];
#pragma GCC unroll 6
    for (int r = 0; r < kRows; ++r) left[r] = right[r] = _mm256_setzero_ps();
    for (int64_t p = 0; p < depth; ++p) {
      const __m256 b_left = _mm256_loadu_ps(panel + p * kColumns), b_right = _mm256_loadu_ps(panel + p * kColumns + 8);
      const float* a = strip + p * kRows;
#pragma GCC unroll 6
      for (int r = 0; r < kRows; ++r) {
        const __m256 a_value = _mm256_broadcast_ss(a + r);
        left[r] = _mm256_fmadd_ps(a_value, b_left, left[r]);
        right[r] = _mm256_fmadd_ps(a_value, b_right, right[r]);
      }
    }
    // The sums leave their registers once, into a tile that the stores read: stores that used the
    // registers themselves, in a loop the compiler does not unroll whole, would make it keep a copy
    // of every sum in memory through the k loop, a store per FMA.
    alignas(32) float tile[kRows][kColumns];
#pragma GCC unroll 6
    for (int r = 0; r < kRows; ++r) {
      _mm256_store_ps(tile[r], left[r]);
      _mm256_store_ps(tile[r] + 8, right[r]);
    }
    if (cols < kColumns) {  // an edge: the portable store, on the same sums
      packed::store_tile</*kFlushToBf16=*/false>(tile, c, ldc, rows, cols, alpha, beta);
      return;
    }
    const __m256 scale = _mm256_set1_ps(alpha), old_scale = _mm256_set1_ps(beta);
    for (int64_t r = 0; r < rows; ++r) {
      Out* row = c + r * ldc;
      __m256 sums_left = _mm256_load_ps(tile[r]), sums_right = _mm256_load_ps(tile[r] + 8);
      if (alpha != 1) {
        sums_left = _mm256_mul_ps(scale, sums_left);
        sums_right = _mm256_mul_ps(scale, sums_right);
      }
      if (beta != 0) {
        sums_left = _mm256_fmadd_ps(old_scale, load8(row), sums_left);
        sums_right = _mm256_fmadd_ps(old_scale, load8(row + 8), sums_right);
      }
      store8(row, sums_left);
      store8(row + 8, sums_right);
    }
  }
};
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// 16 lanes of c, loaded (masked: c past the edge is never read) as float32, and stored rounded
// once to c's type: the AVX-512 kernels' store.
inline __m512 load_lanes(const float* c, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, c); }
inline __m512 load_lanes(const BFloat16* c, __mmask16 mask) {  // bfloat16 widens exactly: 16 more bits
  const __m256i bits = _mm256_maskz_loadu_epi16(mask, c);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
inline __m512 load_lanes(const Float16* c, __mmask16 mask) {  // exact, as half.h's decoding is
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, c));
}
inline void store_lanes(float* c, __mmask16 mask, __m512 value) { _mm512_mask_storeu_ps(c, mask, value); }
inline void store_lanes(BFloat16* c, __mmask16 mask, __m512 value) {
#if defined(__AVX512BF16__)
  // vcvtneps2bf16 rounds to nearest even, as half.h does, NaNs stay (quiet) NaNs, and a subnormal
  // reads as zero: only the pair kernels store through it (their sums are flushed alike).
  _mm256_mask_storeu_epi16(c, mask, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(value)));
#else
  // half_bits::from_float_to_bfloat16 on 16 lanes (see store8 above).
  const __m512i bits = _mm512_castps_si512(value);
  const __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lowest_kept)), 16);
  const __m512i quiet_nan = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  const __mmask16 is_nan = _mm512_cmp_ps_mask(value, value, _CMP_UNORD_Q);
  _mm256_mask_storeu_epi16(c, mask, _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet_nan)));
#endif
}
inline void store_lanes(Float16* c, __mmask16 mask, __m512 value) {
  // IEEE rounding to nearest even, subnormals and NaNs as half.h rounds them.
  _mm256_mask_storeu_epi16(c, mask, _mm512_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// The AVX-512 kernels' store of a tile of 12 rows held as two vectors per row (left: columns
// 0-15, right: 16-31): alpha, beta c, the edges masked.
template <int64_t kRows, class Out>
inline void store_rows(__m512 (&left)[kRows], __m512 (&right)[kRows], Out* c, int64_t ldc, int64_t rows,
                       int64_t cols, float alpha, float beta) {
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

// The tile of 12 rows x 32 columns in 24 of AVX-512's 32 registers; per k, two loads of b, 12
// broadcasts of a, 24 FMAs.
struct Avx512FmaKernel {
  static constexpr int64_t kRows = 12, kColumns = 32;
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
    store_rows(left, right, c, ldc, rows, cols, alpha, beta);
  }
};
#endif

}  // namespace ember::cpu::EMBER_CPU_KERNELS
