// Philox counters drawn many at a time on the CPU, for the kernels that need a random number per
// element (dropout, attention's dropout): the same numbers as core/random.h's philox4x32,
// computed with the counters side by side in vector lanes.
#pragma once

#include <cstdint>

#include "core/random.h"

// With AVX-512 (ember's default -march=native build on these machines), blocks of counters are
// drawn with intrinsics: compilers turn the portable loop's 32x32->64-bit products into full
// 64-bit multiplies, about three times slower.
#if defined(__AVX512F__) && !defined(__CUDACC__)
#include "core/cpu/x86_intrinsics.h"
#define EMBER_PHILOX_AVX512 1
#endif

namespace ember {

#ifdef EMBER_PHILOX_AVX512
namespace detail {

// The high and low 32 bits of the 16 products a[l] * multiplier (both 32-bit): vpmuludq
// multiplies the even lanes, and the odd ones shifted down.
inline void multiply_high_low(__m512i a, __m512i multiplier, __m512i& high, __m512i& low) {
  const __m512i even = _mm512_mul_epu32(a, multiplier);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), multiplier);
  constexpr __mmask16 kOddLanes = 0xAAAA;
  high = _mm512_mask_blend_epi32(kOddLanes, _mm512_srli_epi64(even, 32), odd);
  low = _mm512_mask_blend_epi32(kOddLanes, even, _mm512_slli_epi64(odd, 32));
}

// Stores one vector per word (lane j: counter j) in stream order, counter j's four words
// together: 4x4 transposes within each 128-bit lane, then of the 128-bit lanes.
inline void store_in_stream_order(__m512i c0, __m512i c1, __m512i c2, __m512i c3, uint32_t* words) {
  const __m512i words01_low = _mm512_unpacklo_epi32(c0, c1), words01_high = _mm512_unpackhi_epi32(c0, c1);
  const __m512i words23_low = _mm512_unpacklo_epi32(c2, c3), words23_high = _mm512_unpackhi_epi32(c2, c3);
  // u[r]'s 128-bit lane q holds counter 4q + r.
  const __m512i u0 = _mm512_unpacklo_epi64(words01_low, words23_low);
  const __m512i u1 = _mm512_unpackhi_epi64(words01_low, words23_low);
  const __m512i u2 = _mm512_unpacklo_epi64(words01_high, words23_high);
  const __m512i u3 = _mm512_unpackhi_epi64(words01_high, words23_high);
  const __m512i s0 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0));  // counters 0, 4, 1, 5
  const __m512i s1 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0));  // 2, 6, 3, 7
  const __m512i s2 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2));  // 8, 12, 9, 13
  const __m512i s3 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2));  // 10, 14, 11, 15
  _mm512_storeu_si512(words, _mm512_shuffle_i32x4(s0, s1, _MM_SHUFFLE(2, 0, 2, 0)));       // 0-3
  _mm512_storeu_si512(words + 16, _mm512_shuffle_i32x4(s0, s1, _MM_SHUFFLE(3, 1, 3, 1)));  // 4-7
  _mm512_storeu_si512(words + 32, _mm512_shuffle_i32x4(s2, s3, _MM_SHUFFLE(2, 0, 2, 0)));  // 8-11
  _mm512_storeu_si512(words + 48, _mm512_shuffle_i32x4(s2, s3, _MM_SHUFFLE(3, 1, 3, 1)));  // 12-15
}

// philox4x32 of the 16 * kVectors counters first_counter... into words, in stream order.
// Several vectors go through the rounds side by side: one alone would wait on each round's
// multiply latency.
template <int kVectors>
inline void philox4x32_vectors(uint64_t key, uint64_t first_counter, uint32_t* words) {
  constexpr int kCounters = 16 * kVectors;
  alignas(64) uint32_t counter_low[kCounters], counter_high[kCounters];
  for (int j = 0; j < kCounters; ++j) {
    const uint64_t counter = first_counter + static_cast<uint64_t>(j);
    counter_low[j] = static_cast<uint32_t>(counter);
    counter_high[j] = static_cast<uint32_t>(counter >> 32);
  }
  __m512i c0[kVectors], c1[kVectors], c2[kVectors], c3[kVectors];
  for (int v = 0; v < kVectors; ++v) {
    c0[v] = _mm512_load_si512(counter_low + 16 * v);
    c1[v] = _mm512_load_si512(counter_high + 16 * v);
    c2[v] = _mm512_setzero_si512();
    c3[v] = _mm512_setzero_si512();
  }
  const __m512i multiplier0 = _mm512_set1_epi32(static_cast<int>(kPhiloxMultiplier0));
  const __m512i multiplier1 = _mm512_set1_epi32(static_cast<int>(kPhiloxMultiplier1));
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  constexpr int kXorOfThree = 0x96;  // ternary-logic truth table of a ^ b ^ c
  for (int round = 0; round < 10; ++round) {
    const __m512i key0 = _mm512_set1_epi32(static_cast<int>(k0)), key1 = _mm512_set1_epi32(static_cast<int>(k1));
    for (int v = 0; v < kVectors; ++v) {
      __m512i high0, low0, high1, low1;
      multiply_high_low(c0[v], multiplier0, high0, low0);
      multiply_high_low(c2[v], multiplier1, high1, low1);
      c0[v] = _mm512_ternarylogic_epi32(high1, c1[v], key0, kXorOfThree);
      c2[v] = _mm512_ternarylogic_epi32(high0, c3[v], key1, kXorOfThree);
      c1[v] = low1;
      c3[v] = low0;
    }
    k0 += kPhiloxWeyl0;
    k1 += kPhiloxWeyl1;
  }
  for (int v = 0; v < kVectors; ++v) store_in_stream_order(c0[v], c1[v], c2[v], c3[v], words + 64 * v);
}

}  // namespace detail
#endif

// The words of kBlock consecutive counters, first_counter onwards, in stream order:
// words[4 * j + w] is word w of counter first_counter + j, i.e. random_word(i) for
// i = 4 * first_counter + 4 * j + w. The same numbers as kBlock calls of philox4x32, computed
// with the counters side by side in vector lanes.
template <int kBlock>
inline void philox4x32_block(uint64_t key, uint64_t first_counter, uint32_t* words) {
#ifdef EMBER_PHILOX_AVX512
  if constexpr (kBlock % 64 == 0) {
    for (int j = 0; j < kBlock; j += 64) detail::philox4x32_vectors<4>(key, first_counter + j, words + 4 * j);
    return;
  } else if constexpr (kBlock % 16 == 0) {
    detail::philox4x32_vectors<kBlock / 16>(key, first_counter, words);
    return;
  }
#endif
  for (int j = 0; j < kBlock; ++j) {
    const uint64_t counter = first_counter + static_cast<uint64_t>(j);
    uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
    for (int round = 0; round < 10; ++round) {
      const uint64_t product0 = static_cast<uint64_t>(kPhiloxMultiplier0) * c0;
      const uint64_t product1 = static_cast<uint64_t>(kPhiloxMultiplier1) * c2;
      const uint32_t next0 = static_cast<uint32_t>(product1 >> 32) ^ c1 ^ k0;
      const uint32_t next2 = static_cast<uint32_t>(product0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<uint32_t>(product1);
      c3 = static_cast<uint32_t>(product0);
      c0 = next0;
      c2 = next2;
      k0 += kPhiloxWeyl0;
      k1 += kPhiloxWeyl1;
    }
    words[4 * j] = c0;
    words[4 * j + 1] = c1;
    words[4 * j + 2] = c2;
    words[4 * j + 3] = c3;
  }
}

}  // namespace ember
