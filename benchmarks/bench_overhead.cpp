// Framework overhead: the cost of one op on a one-element tensor, where the arithmetic is
// nothing and everything else (checks, allocation, dispatch, graph recording) is what is timed.
#include <benchmark/benchmark.h>

#include "ember.h"

namespace {

using namespace ember;

void add_no_grad(benchmark::State& state) {
  const Tensor a = ones({1});
  const Tensor b = ones({1});
  for (auto _ : state) {
    Tensor out = add(a, b);
    benchmark::DoNotOptimize(out.impl());
  }
}
BENCHMARK(add_no_grad);

// One input requires grad, so each add also records a node (its backward never runs).
void add_recording_grad(benchmark::State& state) {
  const Tensor a = ones({1}, TensorOptions().requires_grad(true));
  const Tensor b = ones({1});
  for (auto _ : state) {
    Tensor out = add(a, b);
    benchmark::DoNotOptimize(out.impl());
  }
}
BENCHMARK(add_recording_grad);

}  // namespace

BENCHMARK_MAIN();
