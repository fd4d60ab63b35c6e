// Random numbers: a counter-based generator (Philox 4x32-10), so element i of a random tensor
// depends only on the seed and its position. CPU threads fill disjoint ranges without
// coordination, and a GPU kernel computes the very same numbers.
#pragma once

#include <array>
#include <cstdint>

// The generator's arithmetic is shared with CUDA kernels (cuda/ops/dropout.cu): compiled by nvcc,
// these functions exist on the device too, so both devices draw the very same numbers.
#ifdef __CUDACC__
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
  // Set only for a draw recorded into a CUDA graph (cuda/graph/graph.cpp): the device address of the
  // pair (seed, base offset) that the host writes before each replay, so that every replay
  // draws fresh numbers. offset is then relative to that base. Kernels call resolve() first.
  const uint64_t* graph_seed_and_offset = nullptr;
};

// The absolute (seed, offset) of a draw. Device code only may meet a graph-relative state: the
// pair it points to lives in device memory.
EMBER_HOST_DEVICE inline PhiloxState resolve(const PhiloxState& state) {
  if (state.graph_seed_and_offset == nullptr) return state;
  return {state.graph_seed_and_offset[0], state.graph_seed_and_offset[1] + state.offset, nullptr};
}

// Where a draw's kernel runs: only GPU draws can be recorded into a CUDA graph.
enum class DrawOn { kCPU, kGPU };

// The global generator. Each random op reserves `counters` counters (4 random 32-bit words
// each) and draws from them, so consecutive ops never reuse numbers.
//
// While a CUDA graph is captured (between begin_graph_capture and end_graph_capture), the
// kernels are recorded, not run, and a replay must draw fresh numbers each time without the
// host being involved. So a GPU draw then gets an offset relative to a (seed, base) pair in
// device memory, and the offset of the generator does not move; the capture ends knowing how
// many counters one replay spans, and before each replay reserve(that many) gives the pair's
// value. Replay n thus draws exactly the counters the n-th uncaptured run of the same step
// would have drawn. A CPU draw inside a capture would run once, at capture, and never on a
// replay, so it is refused.
class Generator {
 public:
  static Generator& global();
  void seed(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }
  PhiloxState reserve(uint64_t counters, DrawOn where = DrawOn::kCPU);
  // For checkpoints: the whole state is (seed, offset).
  PhiloxState state() const { return {seed_, offset_}; }
  void set_state(PhiloxState state);

  // `device_seed_and_offset`: the device address of the pair the replays' kernels read.
  void begin_graph_capture(const uint64_t* device_seed_and_offset);
  // The counters one replay of the captured work draws.
  uint64_t end_graph_capture();
  bool is_capturing() const { return capture_base_ != nullptr; }

 private:
  uint64_t seed_ = 5489;
  uint64_t offset_ = 0;
  const uint64_t* capture_base_ = nullptr;  // set while a graph is captured
  uint64_t captured_counters_ = 0;          // drawn, relative to it, so far
};

// Philox 4x32-10's round multipliers, and the increments of the key between rounds (a Weyl
// sequence): shared by philox4x32 below and the CPU's vectorised draws (core/cpu/kernels/philox_lanes.h).
inline constexpr uint32_t kPhiloxMultiplier0 = 0xD2511F53u, kPhiloxMultiplier1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;

// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011): four
// random 32-bit words for (key, counter). Ten rounds of two 32x32->64-bit products; inline so
// that CPU kernels drawing many counters at once (core/cpu/kernels/philox_lanes.h) can vectorise it.
EMBER_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t product0 = static_cast<uint64_t>(kPhiloxMultiplier0) * c0;
    const uint64_t product1 = static_cast<uint64_t>(kPhiloxMultiplier1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(product0 >> 32), lo0 = static_cast<uint32_t>(product0);
    const uint32_t hi1 = static_cast<uint32_t>(product1 >> 32), lo1 = static_cast<uint32_t>(product1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kPhiloxWeyl0;
    k1 += kPhiloxWeyl1;
  }
  return {c0, c1, c2, c3};
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
