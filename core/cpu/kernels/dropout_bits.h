// Dropout's mask as bits, from Philox words (core/cpu/kernels/philox_lanes.h): element e of a
// draw is kept iff uniform_float(word e) >= p (core/ops/dropout.cpp). uniform_float(w) is
// (w >> 8) 2^-24 exactly, so the test is the integer one (w >> 8) >= threshold with
// threshold = ceil(p 2^24) (p rounded to float first, as the float test reads it): a vector
// compare, whose lanes' sign bits gather into the mask's bits in one instruction.
#pragma once

#include <cstdint>

#include "core/cpu/kernels/philox_lanes.h"
#include "core/cpu/kernels/rung_namespace.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include "core/cpu/x86_intrinsics.h"
#endif

namespace ember::cpu::EMBER_CPU_KERNELS {

// Bit j of the result: whether words[j] >> 8 >= threshold, for the 32 words given.
inline uint32_t keep_bits_of_32(const uint32_t* words, uint32_t threshold) {
  uint32_t bits = 0;
#if defined(__AVX512F__)
  const __m512i at_least = _mm512_set1_epi32(static_cast<int>(threshold));
  for (int half = 0; half < 2; ++half) {
    const __m512i drawn = _mm512_srli_epi32(_mm512_loadu_si512(words + 16 * half), 8);
    bits |= static_cast<uint32_t>(_mm512_cmpge_epu32_mask(drawn, at_least)) << (16 * half);
  }
#elif defined(__AVX2__)
  // Signed compares are exact here: both sides lie below 2^24 + 1.
  const __m256i below = _mm256_set1_epi32(static_cast<int>(threshold) - 1);
  for (int eighth = 0; eighth < 4; ++eighth) {
    const __m256i drawn =
        _mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + 8 * eighth)), 8);
    const int keep = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(drawn, below)));
    bits |= static_cast<uint32_t>(keep) << (8 * eighth);
  }
#else
  for (int j = 0; j < 32; ++j) bits |= static_cast<uint32_t>((words[j] >> 8) >= threshold) << j;
#endif
  return bits;
}

// The keep bits of the 4 counters elements drawn from counters first_counter...: bit e % 32 of
// bits[e / 32]. counters is a multiple of 8 (32 elements, one word of bits).
inline void dropout_keep_bits(uint64_t key, uint64_t first_counter, int64_t counters, uint32_t threshold,
                              uint32_t* bits) {
  constexpr int64_t kBlock = 64;  // counters drawn at a time: 256 words, 8 words of bits
  alignas(64) uint32_t words[4 * kBlock];
  for (int64_t done = 0; done < counters; done += kBlock) {
    const int64_t block = smaller(kBlock, counters - done);
    philox4x32_counters(key, first_counter + static_cast<uint64_t>(done), block, words);
    for (int64_t w = 0; w < block / 8; ++w) bits[done / 8 + w] = keep_bits_of_32(words + 32 * w, threshold);
  }
}

// out[i] = x[i] * (bit i of bits ? scale : 0) for i < count: dropout applied from its bits, the
// product with 0 kept (a dropped infinity or NaN gives NaN, as x * mask * scale does elsewhere).
inline void apply_keep_bits(const float* x, const uint32_t* bits, int64_t count, float scale, float* out) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 scaled = _mm512_set1_ps(scale);
  for (; i + 16 <= count; i += 16) {
    const auto keep = static_cast<__mmask16>(bits[i >> 5] >> (i & 31));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_maskz_mov_ps(keep, scaled)));
  }
#elif defined(__AVX2__)
  // Bit j of a byte, spread to lane j: each lane tests its own bit of the byte broadcast to all.
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 scaled = _mm256_set1_ps(scale);
  for (; i + 8 <= count; i += 8) {
    const __m256i byte = _mm256_set1_epi32(static_cast<int>((bits[i >> 5] >> (i & 31)) & 0xffu));
    const __m256i kept = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane_bit), lane_bit);
    const __m256 factor = _mm256_and_ps(_mm256_castsi256_ps(kept), scaled);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), factor));
  }
#endif
  for (; i < count; ++i) out[i] = x[i] * (static_cast<float>((bits[i >> 5] >> (i & 31)) & 1u) * scale);
}

}  // namespace ember::cpu::EMBER_CPU_KERNELS
