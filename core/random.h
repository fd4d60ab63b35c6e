// Random numbers: a counter-based generator (Philox 4x32-10), so element i of a random tensor
// depends only on the seed and its position. CPU threads fill disjoint ranges without
// coordination, and a GPU kernel computes the very same numbers.
#pragma once

#include <array>
#include <cstdint>

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

// Four random 32-bit words for (key, counter).
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter);

// Random word `i` of a draw: word i % 4 of counter offset + i / 4.
inline uint32_t random_word(const PhiloxState& state, uint64_t i) {
  return philox4x32(state.seed, state.offset + i / 4)[i % 4];
}

// A uniform float in [0, 1) from a 32-bit word (24 bits of mantissa).
inline float uniform_float(uint32_t word) { return static_cast<float>(word >> 8) * (1.0f / 16777216.0f); }
// A uniform double in [0, 1) from two words (53 bits).
inline double uniform_double(uint32_t high, uint32_t low) {
  const uint64_t bits = (static_cast<uint64_t>(high) << 21) ^ (low >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace ember
