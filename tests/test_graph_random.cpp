// The random generator's side of CUDA graph capture (core/random.h), checked on the CPU: GPU
// draws recorded during a capture are relative to a (seed, base) pair that the host sets before
// each replay, and replay n must draw exactly the counters the n-th uncaptured run of the same
// step draws. A host array stands in for the pair's device memory: resolve() reads it the same
// way a kernel does.
#include <array>
#include <vector>

#include "helpers.h"

namespace ember {
namespace {

// The draws of one "step": three GPU ops of different sizes, as dropout and attention make.
constexpr std::array<uint64_t, 3> kStepDraws = {5, 17, 2};

std::vector<PhiloxState> uncaptured_step(Generator& generator) {
  std::vector<PhiloxState> states;
  for (const uint64_t counters : kStepDraws) states.push_back(generator.reserve(counters, DrawOn::kGPU));
  return states;
}

TEST_CASE("a replayed capture draws the counters the uncaptured steps draw, step after step") {
  Generator eager, graphed;
  eager.seed(1234);
  graphed.seed(1234);
  uncaptured_step(eager);  // a warm-up step, run uncaptured by both before the capture
  uncaptured_step(graphed);

  std::array<uint64_t, 2> device_pair{};  // stands in for the graph's device memory
  graphed.begin_graph_capture(device_pair.data());
  const std::vector<PhiloxState> recorded = uncaptured_step(graphed);  // recorded, not run
  const uint64_t per_replay = graphed.end_graph_capture();
  CHECK(per_replay == 5 + 17 + 2);
  CHECK(graphed.state().offset == eager.state().offset);  // capturing drew nothing

  for (int step = 0; step < 4; ++step) {
    CAPTURE(step);
    // Before a replay the host reserves what one replay draws and writes the pair.
    const PhiloxState base = graphed.reserve(per_replay);
    device_pair = {base.seed, base.offset};
    const std::vector<PhiloxState> expected = uncaptured_step(eager);
    for (size_t k = 0; k < recorded.size(); ++k) {
      const PhiloxState drawn = resolve(recorded[k]);
      CHECK(drawn.seed == expected[k].seed);
      CHECK(drawn.offset == expected[k].offset);
      CHECK(drawn.graph_seed_and_offset == nullptr);
      CHECK(random_word(drawn, 3) == random_word(expected[k], 3));
    }
  }
  CHECK(graphed.state().offset == eager.state().offset);
}

TEST_CASE("a new seed reaches the replays through the pair, not the recorded draws") {
  Generator generator;
  generator.seed(7);
  std::array<uint64_t, 2> device_pair{};
  generator.begin_graph_capture(device_pair.data());
  const PhiloxState recorded = generator.reserve(4, DrawOn::kGPU);
  generator.end_graph_capture();
  generator.seed(99);
  const PhiloxState base = generator.reserve(4);
  device_pair = {base.seed, base.offset};
  CHECK(resolve(recorded).seed == 99);
  CHECK(resolve(recorded).offset == 0);
}

TEST_CASE("outside a capture every draw is absolute, on either device") {
  Generator generator;
  generator.seed(5);
  const PhiloxState cpu = generator.reserve(3), gpu = generator.reserve(2, DrawOn::kGPU);
  CHECK(cpu.graph_seed_and_offset == nullptr);
  CHECK(gpu.graph_seed_and_offset == nullptr);
  CHECK(gpu.offset == 3);
  CHECK(resolve(gpu).offset == 3);
}

TEST_CASE("capture misuse is a clear error") {
  Generator generator;
  std::array<uint64_t, 2> device_pair{};
  CHECK_THROWS_WITH_AS(generator.end_graph_capture(), doctest::Contains("without begin_graph_capture"), Error);
  CHECK_THROWS_WITH_AS(generator.begin_graph_capture(nullptr), doctest::Contains("device address"), Error);
  generator.begin_graph_capture(device_pair.data());
  CHECK(generator.is_capturing());
  CHECK_THROWS_WITH_AS(generator.begin_graph_capture(device_pair.data()), doctest::Contains("do not nest"), Error);
  // A CPU draw would happen once, at capture, and never on a replay.
  CHECK_THROWS_WITH_AS(generator.reserve(8), doctest::Contains("CPU draw of 8 counters inside a CUDA graph capture"),
                       Error);
  CHECK(generator.end_graph_capture() == 0);
  CHECK_FALSE(generator.is_capturing());
}

}  // namespace
}  // namespace ember
