// The global random generator (Philox itself is in random.h, inline, so kernels vectorise it).
#include "core/random.h"

#include "core/error.h"

namespace ember {

Generator& Generator::global() {
  static Generator generator;
  return generator;
}

void Generator::seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

PhiloxState Generator::reserve(uint64_t counters, DrawOn where) {
  if (is_capturing()) {
    EMBER_CHECK(where == DrawOn::kGPU,
                "random: a CPU draw of {} counters inside a CUDA graph capture would run once and never on a replay; "
                "draw on the GPU, or outside the captured step",
                counters);
    const PhiloxState state{seed_, captured_counters_, capture_base_};
    captured_counters_ += counters;
    return state;
  }
  PhiloxState state{seed_, offset_};
  offset_ += counters;
  return state;
}

void Generator::begin_graph_capture(const uint64_t* device_seed_and_offset) {
  EMBER_CHECK(device_seed_and_offset != nullptr, "random: a graph capture needs the device address of its seed and offset");
  EMBER_CHECK(!is_capturing(), "random: a CUDA graph capture is already under way; captures do not nest");
  capture_base_ = device_seed_and_offset;
  captured_counters_ = 0;
}

uint64_t Generator::end_graph_capture() {
  EMBER_CHECK(is_capturing(), "random: end_graph_capture without begin_graph_capture");
  capture_base_ = nullptr;
  return captured_counters_;
}

void Generator::set_state(PhiloxState state) {
  seed_ = state.seed;
  offset_ = state.offset;
}

void manual_seed(uint64_t seed) { Generator::global().seed(seed); }

}  // namespace ember
