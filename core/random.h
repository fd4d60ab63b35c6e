// Random numbers: a counter-based generator (Philox 4x32-10), so element i of a random tensor
// depends only on the seed and its position. CPU threads fill disjoint ranges without
// coordination, and a GPU kernel computes the very same numbers.
#pragma once

#include <array>
#include <cstdint>

// The Philox functions below are compiled for the GPU too (cuda/factory.cu), so that a CUDA
// draw gives the very numbers of the CPU draw. This header must stay free of fmt for nvcc.
#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif

namespace ember {

// Makes every later random op (rand, randn, randint, dropout, parameter init) repeatable.
void manual_seed(uint64_t seed);

struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // first counter this draw may use
};

// The global generator. Each random op reserves `counters` counters (4 random 32-bit words
// each) and draws from them, so consecutive ops never reuse numbers.
class Generator {
 public:
  static Generator& global();
  void seed(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }
  PhiloxState reserve(uint64_t counters);
  // For checkpoints: the whole state is (seed, offset).
  PhiloxState state() const { return {seed_, offset_}; }
  void set_state(PhiloxState state);

 private:
  uint64_t seed_ = 5489;
  uint64_t offset_ = 0;
};

// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011): four
// random 32-bit words for (key, counter). Ten rounds of two 32x32->64-bit products; inline so
// that kernels drawing many counters at once (philox4x32_block) compile to vector code.
EMBER_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * c0;
    const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(product0 >> 32), lo0 = static_cast<uint32_t>(product0);
    const uint32_t hi1 = static_cast<uint32_t>(product1 >> 32), lo1 = static_cast<uint32_t>(product1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
}

// The words of kBlock consecutive counters, first_counter onwards, in stream order:
// words[4 * j + w] is word w of counter first_counter + j, i.e. random_word(i) for
// i = 4 * first_counter + 4 * j + w. The same numbers as kBlock calls of philox4x32, computed
// with the counters side by side in vector lanes.
template <int kBlock>
inline void philox4x32_block(uint64_t key, uint64_t first_counter, uint32_t* words) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int j = 0; j < kBlock; ++j) {
    const uint64_t counter = first_counter + static_cast<uint64_t>(j);
    uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
    for (int round = 0; round < 10; ++round) {
      const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * c0;
      const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * c2;
      const uint32_t next0 = static_cast<uint32_t>(product1 >> 32) ^ c1 ^ k0;
      const uint32_t next2 = static_cast<uint32_t>(product0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<uint32_t>(product1);
      c3 = static_cast<uint32_t>(product0);
      c0 = next0;
      c2 = next2;
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    words[4 * j] = c0;
    words[4 * j + 1] = c1;
    words[4 * j + 2] = c2;
    words[4 * j + 3] = c3;
  }
}

// Random word `i` of a draw: word i % 4 of counter offset + i / 4.
EMBER_HOST_DEVICE inline uint32_t random_word(const PhiloxState& state, uint64_t i) {
  return philox4x32(state.seed, state.offset + i / 4)[i % 4];
}

// A uniform float in [0, 1) from a 32-bit word (24 bits of mantissa).
EMBER_HOST_DEVICE inline float uniform_float(uint32_t word) { return static_cast<float>(word >> 8) * (1.0f / 16777216.0f); }
// A uniform double in [0, 1) from two words (53 bits).
EMBER_HOST_DEVICE inline double uniform_double(uint32_t high, uint32_t low) {
  const uint64_t bits = (static_cast<uint64_t>(high) << 21) ^ (low >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace ember
