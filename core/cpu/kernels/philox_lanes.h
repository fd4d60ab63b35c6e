// Philox counters drawn many at a time on the CPU, for the kernels that need a random number per
// element (dropout, attention's dropout): the same numbers as core/random.h's philox4x32,
// computed with the counters side by side in vector lanes, 16 at a time with AVX-512 and 8 with
// AVX2. Compilers turn the scalar loop's 32x32->64-bit products into full 64-bit multiplies,
// about three times slower than vpmuludq on the lanes, so each rung has its intrinsics.
#pragma once

#include <cstdint>

#include "core/cpu/kernels/rung_namespace.h"
#include "core/random.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include "core/cpu/x86_intrinsics.h"
#endif

namespace ember::cpu::EMBER_CPU_KERNELS {

// philox4x32 of one counter into words[0..3], in scalar C++ (core/random.h's rounds, kept in this
// rung's namespace: see rung_namespace.h).
inline void philox4x32_one(uint64_t key, uint64_t counter, uint32_t* words) {
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
  words[0] = c0;
  words[1] = c1;
  words[2] = c2;
  words[3] = c3;
}

#if defined(__AVX512F__)
namespace avx512 {
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

}  // namespace avx512
#endif

#if defined(__AVX2__)
namespace avx2 {

// The high and low 32 bits of the 8 products a[l] * multiplier (both 32-bit): vpmuludq
// multiplies the even lanes, and the odd ones shifted down.
inline void multiply_high_low(__m256i a, __m256i multiplier, __m256i& high, __m256i& low) {
  const __m256i even = _mm256_mul_epu32(a, multiplier);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), multiplier);
  constexpr int kOddLanes = 0xAA;
  high = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, kOddLanes);
  low = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), kOddLanes);
}

// Stores one vector per word (lane j: counter j) in stream order, counter j's four words
// together: 4x4 transposes within each 128-bit lane, then the lanes brought together.
inline void store_in_stream_order(__m256i c0, __m256i c1, __m256i c2, __m256i c3, uint32_t* words) {
  const __m256i words01_low = _mm256_unpacklo_epi32(c0, c1), words01_high = _mm256_unpackhi_epi32(c0, c1);
  const __m256i words23_low = _mm256_unpacklo_epi32(c2, c3), words23_high = _mm256_unpackhi_epi32(c2, c3);
  // u[r]'s 128-bit lane q holds counter 4q + r.
  const __m256i u0 = _mm256_unpacklo_epi64(words01_low, words23_low);
  const __m256i u1 = _mm256_unpackhi_epi64(words01_low, words23_low);
  const __m256i u2 = _mm256_unpacklo_epi64(words01_high, words23_high);
  const __m256i u3 = _mm256_unpackhi_epi64(words01_high, words23_high);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words), _mm256_permute2x128_si256(u0, u1, 0x20));       // 0, 1
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + 8), _mm256_permute2x128_si256(u2, u3, 0x20));   // 2, 3
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + 16), _mm256_permute2x128_si256(u0, u1, 0x31));  // 4, 5
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + 24), _mm256_permute2x128_si256(u2, u3, 0x31));  // 6, 7
}

// philox4x32 of the 8 * kVectors counters first_counter... into words, in stream order, several
// vectors side by side (one alone would wait on each round's multiply latency).
template <int kVectors>
inline void philox4x32_vectors(uint64_t key, uint64_t first_counter, uint32_t* words) {
  __m256i c0[kVectors], c1[kVectors], c2[kVectors], c3[kVectors];
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int v = 0; v < kVectors; ++v) {
    // Counters first_counter + 8v + lane: their low words, and high words that carry where the
    // low ones wrapped (the unsigned sum came out below the start).
    const uint64_t first = first_counter + static_cast<uint64_t>(8 * v);
    const __m256i start = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first)));
    const __m256i low = _mm256_add_epi32(start, lane);
    const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    const __m256i wrapped = _mm256_cmpgt_epi32(_mm256_xor_si256(start, sign), _mm256_xor_si256(low, sign));
    c0[v] = low;
    c1[v] = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first >> 32))), wrapped);
    c2[v] = _mm256_setzero_si256();
    c3[v] = _mm256_setzero_si256();
  }
  const __m256i multiplier0 = _mm256_set1_epi32(static_cast<int>(kPhiloxMultiplier0));
  const __m256i multiplier1 = _mm256_set1_epi32(static_cast<int>(kPhiloxMultiplier1));
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i key0 = _mm256_set1_epi32(static_cast<int>(k0)), key1 = _mm256_set1_epi32(static_cast<int>(k1));
    for (int v = 0; v < kVectors; ++v) {
      __m256i high0, low0, high1, low1;
      multiply_high_low(c0[v], multiplier0, high0, low0);
      multiply_high_low(c2[v], multiplier1, high1, low1);
      c0[v] = _mm256_xor_si256(_mm256_xor_si256(high1, c1[v]), key0);
      c2[v] = _mm256_xor_si256(_mm256_xor_si256(high0, c3[v]), key1);
      c1[v] = low1;
      c3[v] = low0;
    }
    k0 += kPhiloxWeyl0;
    k1 += kPhiloxWeyl1;
  }
  for (int v = 0; v < kVectors; ++v) store_in_stream_order(c0[v], c1[v], c2[v], c3[v], words + 32 * v);
}

}  // namespace avx2
#endif

// words[4 j + w] = word w of philox4x32(key, first_counter + j) for j < counters: as many
// counters as fit go through the widest lanes this rung compiles, the rest one at a time.
inline void philox4x32_counters(uint64_t key, uint64_t first_counter, int64_t counters, uint32_t* words) {
  int64_t j = 0;
#if defined(__AVX512F__)
  for (; j + 64 <= counters; j += 64) avx512::philox4x32_vectors<4>(key, first_counter + j, words + 4 * j);
  for (; j + 16 <= counters; j += 16) avx512::philox4x32_vectors<1>(key, first_counter + j, words + 4 * j);
#elif defined(__AVX2__)
  for (; j + 16 <= counters; j += 16) avx2::philox4x32_vectors<2>(key, first_counter + j, words + 4 * j);
  for (; j + 8 <= counters; j += 8) avx2::philox4x32_vectors<1>(key, first_counter + j, words + 4 * j);
#endif
  for (; j < counters; ++j) philox4x32_one(key, first_counter + static_cast<uint64_t>(j), words + 4 * j);
}

}  // namespace ember::cpu::EMBER_CPU_KERNELS
