// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011) and the
// global generator.
#include "core/random.h"

namespace ember {

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter) {
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

Generator& Generator::global() {
  static Generator generator;
  return generator;
}

void Generator::seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

PhiloxState Generator::reserve(uint64_t counters) {
  PhiloxState state{seed_, offset_};
  offset_ += counters;
  return state;
}

void Generator::set_state(PhiloxState state) {
  seed_ = state.seed;
  offset_ = state.offset;
}

void manual_seed(uint64_t seed) { Generator::global().seed(seed); }

}  // namespace ember
