// The global random generator (Philox itself is in random.h, inline, so kernels vectorise it).
#include "core/random.h"

namespace ember {

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
