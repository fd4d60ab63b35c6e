// What element i of a random tensor holds: the mapping from a Philox draw (core/random.h) to
// uniform, normal and integer values. The CPU kernels (core/ops/factory.cpp) and the CUDA ones
// (cuda/ops/factory.cu) both call these, so after manual_seed a draw is the same on every device.
// fmt-free, for nvcc.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/random.h"

namespace ember {

// Uniform [0, 1): element i of a float32 draw uses word i; of a float64 draw, words 2i, 2i+1.
template <class T>
EMBER_HOST_DEVICE inline T uniform_element(const PhiloxState& state, uint64_t i) {
  if constexpr (std::is_same_v<T, float>) return uniform_float(random_word(state, i));
  else return uniform_double(random_word(state, 2 * i), random_word(state, 2 * i + 1));
}
// Standard normal by Box-Muller: element i of a float32 draw uses words 2i and 2i+1; of a
// float64 draw, words 4i..4i+3. Computed in double either way.
template <class T>
EMBER_HOST_DEVICE inline T normal_element(const PhiloxState& state, uint64_t i) {
  double u1, u2;
  if constexpr (std::is_same_v<T, float>) {
    u1 = uniform_float(random_word(state, 2 * i));
    u2 = uniform_float(random_word(state, 2 * i + 1));
  } else {
    const auto words = philox4x32(state.seed, state.offset + i);
    u1 = uniform_double(words[0], words[1]);
    u2 = uniform_double(words[2], words[3]);
  }
  // The global C functions: the host's libm or CUDA's device versions, whichever compiles this.
  constexpr double kTwoPi = 6.283185307179586;  // 2 pi, the double nearest (std::numbers is C++20)
  return static_cast<T>(::sqrt(-2.0 * ::log(1.0 - u1)) * ::cos(kTwoPi * u2));
}
// An integer in [low, low + range): element i uses words 2i and 2i+1 as one 64-bit number.
template <class T>
EMBER_HOST_DEVICE inline T randint_element(const PhiloxState& state, uint64_t i, int64_t low, uint64_t range) {
  const uint64_t bits = (static_cast<uint64_t>(random_word(state, 2 * i)) << 32) | random_word(state, 2 * i + 1);
  // The sum in unsigned arithmetic, which wraps, then back to int64: low + (bits % range) itself
  // can pass INT64_MAX on the way when the range is wider than 2^63.
  return static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + bits % range));
}

}  // namespace ember
