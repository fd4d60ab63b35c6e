// Fused attention on CUDA (cuda/attention.cu) against the composed ops on the same GPU, at the
// sizes the GPU speed figures name: batch 32, 4 heads, head dim 64 at length 128 (the
// classifier's), and longer sequences (1,024 to 4,096) where the composed form's L x S scores
// dominate memory. float32; TF32 does not enter (the fused kernels do not use tensor cores).
//
// FLOP counts are the useful products: 4 B H L S E forward (q k^T and weights v), three times
// that forward and backward (the backward's recomputed scores are not counted), halved when
// causal. Each iteration ends with a device synchronisation, so the time is the kernels'.
//
//   ./build/benchmarks/bench_cuda_attention --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Without a GPU every case is skipped with a message.
#include <benchmark/benchmark.h>

#include "ember.h"

using namespace ember;

namespace {

constexpr int64_t kHeads = 4, kHeadDim = 64;

double attention_flops(int64_t batch, int64_t length, bool causal) {
  const double full = 4.0 * static_cast<double>(batch * kHeads) * static_cast<double>(length) *
                      static_cast<double>(length) * kHeadDim;
  return causal ? full / 2 : full;
}

Tensor attention(bool fused, const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  return fused ? scaled_dot_product_attention(q, k, v, {.is_causal = causal})
               : scaled_dot_product_attention_with_weights(q, k, v, {.is_causal = causal}).output;
}

bool skip_without_gpu(benchmark::State& state) {
  if (cuda::is_available()) return false;
  state.SkipWithError("no CUDA device");
  return true;
}

// Heads split off a [batch, length, heads * head_dim] projection as a view, as
// MultiHeadAttention does.
Tensor split_heads(const Tensor& x) {
  return x.view({x.size(0), x.size(1), kHeads, kHeadDim}).transpose(1, 2);
}

// Arguments: fused or composed, causal or not, length, batch.
void BM_CudaAttentionForward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool fused = state.range(0) != 0, causal = state.range(1) != 0;
  const int64_t length = state.range(2), batch = state.range(3);
  NoGradGuard no_grad;
  const TensorOptions on_gpu = TensorOptions(kFloat32).device(Device::cuda(0));
  const Tensor q = split_heads(randn({batch, length, kHeads * kHeadDim}, on_gpu));
  const Tensor k = split_heads(randn({batch, length, kHeads * kHeadDim}, on_gpu));
  const Tensor v = split_heads(randn({batch, length, kHeads * kHeadDim}, on_gpu));
  for (auto _ : state) {
    benchmark::DoNotOptimize(attention(fused, q, k, v, causal));
    cuda::synchronize();
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      attention_flops(batch, length, causal) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_CudaAttentionForwardBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool fused = state.range(0) != 0, causal = state.range(1) != 0;
  const int64_t length = state.range(2), batch = state.range(3);
  const TensorOptions on_gpu = TensorOptions(kFloat32).device(Device::cuda(0));
  Tensor q = randn({batch, length, kHeads * kHeadDim}, on_gpu), k = randn_like(q), v = randn_like(q);
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_(true);
  const Tensor grad = randn({batch, kHeads, length, kHeadDim}, on_gpu);
  for (auto _ : state) {
    attention(fused, split_heads(q), split_heads(k), split_heads(v), causal).backward(grad);
    for (Tensor* t : {&q, &k, &v}) t->mutable_grad() = Tensor();
    cuda::synchronize();
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      3 * attention_flops(batch, length, causal) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The classifier's shape, fused and composed; then long sequences, fused only (the composed
// form's [32, 4, 4096, 4096] float32 scores alone would take 8 GiB).
void attention_cases(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"fused", "causal", "len", "batch"});
  for (const int64_t fused : {1, 0}) {
    for (const int64_t causal : {0, 1}) bench->Args({fused, causal, 128, 32});
  }
  for (const int64_t length : {1024, 2048, 4096}) {
    for (const int64_t causal : {0, 1}) bench->Args({1, causal, length, 32});
  }
  bench->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_CudaAttentionForward)->Apply(attention_cases);
BENCHMARK(BM_CudaAttentionForwardBackward)->Apply(attention_cases);

}  // namespace

BENCHMARK_MAIN();
