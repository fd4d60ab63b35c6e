// Memory-bound ops on 16 MB float32 tensors ([4096, 1024]) next to a plain OpenMP copy of the
// same size, the bandwidth they should approach. Every benchmark reports bytes_per_second with
// bytes = bytes read + bytes written per call (outputs included, small side outputs too).
//
//   OMP_NUM_THREADS=2 ./build/benchmarks/bench_ops --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "ember.h"

using namespace ember;

namespace {

constexpr int64_t kRows = 4096, kCols = 1024;
constexpr int64_t kElements = kRows * kCols;
constexpr int64_t kTensorBytes = kElements * 4;

void set_bytes(benchmark::State& state, int64_t bytes_per_call) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes_per_call);
}

// The reference: copy 16 MB into a preallocated buffer, split over the OpenMP threads.
void BM_Copy(benchmark::State& state) {
  const Tensor source = randn({kRows, kCols});
  const Tensor destination = empty({kRows, kCols});
  const float* from = source.data_ptr<float>();
  float* to = destination.data_ptr<float>();
  for (auto _ : state) {
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads(), id = omp_get_thread_num();
      const int64_t chunk = (kElements + threads - 1) / threads;
      const int64_t begin = std::min(kElements, id * chunk), end = std::min(kElements, begin + chunk);
      std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin) * sizeof(float));
    }
    benchmark::DoNotOptimize(to);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2 * kTensorBytes);
}
BENCHMARK(BM_Copy)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Add(benchmark::State& state) {
  const Tensor a = randn({kRows, kCols}), b = randn({kRows, kCols});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
  set_bytes(state, 3 * kTensorBytes);
}
BENCHMARK(BM_Add)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Gelu(benchmark::State& state) {
  const Tensor x = randn({kRows, kCols});
  for (auto _ : state) benchmark::DoNotOptimize(gelu(x));
  set_bytes(state, 2 * kTensorBytes);
}
BENCHMARK(BM_Gelu)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Inverted dropout with p = 0.1: reads x, writes the output; its mask comes from Philox
// counters computed on the fly (one 4-word draw per 4 elements), which must keep up.
void BM_Dropout(benchmark::State& state) {
  const Tensor x = randn({kRows, kCols});
  for (auto _ : state) benchmark::DoNotOptimize(dropout(x, 0.1));
  set_bytes(state, 2 * kTensorBytes);
}
BENCHMARK(BM_Dropout)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Dropout's forward and backward on a million elements, as a training step runs them: the
// forward draws the mask and keeps it as bits, the backward reads the bits (core/ops/dropout.cpp).
void BM_DropoutForwardBackward(benchmark::State& state) {
  Tensor x = randn({1000, 1000});
  x.requires_grad_(true);
  const Tensor grad = randn({1000, 1000});
  for (auto _ : state) {
    const Tensor y = dropout(x, 0.1);
    y.backward(grad);
    benchmark::DoNotOptimize(x.grad().raw_data());
    x.mutable_grad() = Tensor();  // no accumulation into the last gradient
  }
  set_bytes(state, 4 * int64_t{1000 * 1000 * 4});
}
BENCHMARK(BM_DropoutForwardBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The fused backward: reads the output gradient and x, writes the input gradient.
void BM_GeluBackward(benchmark::State& state) {
  Tensor x = randn({kRows, kCols});
  x.requires_grad_(true);
  const Tensor y = gelu(x), grad = randn({kRows, kCols});
  for (auto _ : state) {
    y.backward(grad, {.retain_graph = true});
    x.mutable_grad() = Tensor();
  }
  set_bytes(state, 3 * kTensorBytes);
}
BENCHMARK(BM_GeluBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The same ops on bfloat16, as a bf16 autocast step runs them (computed in float32, each
// element widened as read and rounded once as stored), and the casts autocast makes between
// float32 and bfloat16. Bytes counted at two per bfloat16 element.
constexpr int64_t kHalfBytes = kElements * 2;

void BM_GeluBf16(benchmark::State& state) {
  const Tensor x = randn({kRows, kCols}).to(kBFloat16);
  for (auto _ : state) benchmark::DoNotOptimize(gelu(x));
  set_bytes(state, 2 * kHalfBytes);
}
BENCHMARK(BM_GeluBf16)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_GeluBackwardBf16(benchmark::State& state) {
  Tensor x = randn({kRows, kCols}).to(kBFloat16);
  x.requires_grad_(true);
  const Tensor y = gelu(x), grad = randn({kRows, kCols}).to(kBFloat16);
  for (auto _ : state) {
    y.backward(grad, {.retain_graph = true});
    x.mutable_grad() = Tensor();
  }
  set_bytes(state, 3 * kHalfBytes);
}
BENCHMARK(BM_GeluBackwardBf16)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_CastFloat32ToBf16(benchmark::State& state) {
  const Tensor x = randn({kRows, kCols});
  for (auto _ : state) benchmark::DoNotOptimize(x.to(kBFloat16));
  set_bytes(state, kTensorBytes + kHalfBytes);
}
BENCHMARK(BM_CastFloat32ToBf16)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_CastBf16ToFloat32(benchmark::State& state) {
  const Tensor x = randn({kRows, kCols}).to(kBFloat16);
  for (auto _ : state) benchmark::DoNotOptimize(x.to(kFloat32));
  set_bytes(state, kTensorBytes + kHalfBytes);
}
BENCHMARK(BM_CastBf16ToFloat32)->UseRealTime()->Unit(benchmark::kMicrosecond);

// A linear layer's bias gradient: the column sums of a [4096, 1024] output gradient.
void BM_ColumnSumBf16(benchmark::State& state) {
  const Tensor g = randn({kRows, kCols}).to(kBFloat16);
  for (auto _ : state) benchmark::DoNotOptimize(sum(g, {0}));
  set_bytes(state, kHalfBytes);
}
BENCHMARK(BM_ColumnSumBf16)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ColumnSum(benchmark::State& state) {
  const Tensor g = randn({kRows, kCols});
  for (auto _ : state) benchmark::DoNotOptimize(sum(g, {0}));
  set_bytes(state, kTensorBytes);
}
BENCHMARK(BM_ColumnSum)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Softmax(benchmark::State& state) {
  const Tensor x = mul(randn({kRows, kCols}), 3.0);
  for (auto _ : state) benchmark::DoNotOptimize(softmax(x, -1));
  set_bytes(state, 2 * kTensorBytes);
}
BENCHMARK(BM_Softmax)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_LogSoftmax(benchmark::State& state) {
  const Tensor x = mul(randn({kRows, kCols}), 3.0);
  for (auto _ : state) benchmark::DoNotOptimize(log_softmax(x, -1));
  set_bytes(state, 2 * kTensorBytes);
}
BENCHMARK(BM_LogSoftmax)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Reads x, weight and bias; writes y, mean and rstd.
void BM_LayerNorm(benchmark::State& state) {
  const Tensor x = randn({kRows, kCols}), weight = randn({kCols}), bias = randn({kCols});
  for (auto _ : state) benchmark::DoNotOptimize(layer_norm(x, {kCols}, weight, bias));
  set_bytes(state, 2 * kTensorBytes + 2 * kCols * 4 + 2 * kRows * 4);
}
BENCHMARK(BM_LayerNorm)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Reads the logits and int64 targets; writes the per-row loss, max and log-sum (then the
// mean reads the losses once more).
void BM_CrossEntropy(benchmark::State& state) {
  const Tensor logits = mul(randn({kRows, kCols}), 3.0);
  const Tensor targets = randint(0, kCols, {kRows});
  for (auto _ : state) benchmark::DoNotOptimize(cross_entropy(logits, targets));
  set_bytes(state, kTensorBytes + kRows * 8 + 3 * kRows * 4);
}
BENCHMARK(BM_CrossEntropy)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
