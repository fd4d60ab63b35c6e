// The transformer-specific ops at the reference classifier's sizes (batch 32, sequence 128,
// d_model 256, 4 heads, vocabulary 8192), forward and backward, with FLOP or byte counters:
// attention, the embedding's backward (a scatter-add into the table), and one AdamW step over
// the classifier's 5.3 million parameters.
//
//   OMP_NUM_THREADS=2 ./build/benchmarks/bench_transformer_ops --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "ember.h"

using namespace ember;

namespace {

constexpr int64_t kBatch = 32, kHeads = 4, kSeq = 128, kHeadDim = 64, kVocab = 8192, kModel = 256;

// Q K^T and weights @ V: 2 * 2 * L * S * E per head, forward.
double attention_flops() { return 4.0 * kBatch * kHeads * kSeq * kSeq * kHeadDim; }

void BM_AttentionForward(benchmark::State& state) {
  const bool causal = state.range(0) != 0;
  NoGradGuard no_grad;
  const Tensor q = randn({kBatch, kHeads, kSeq, kHeadDim}), k = randn_like(q), v = randn_like(q);
  for (auto _ : state) benchmark::DoNotOptimize(scaled_dot_product_attention(q, k, v, {.is_causal = causal}));
  state.counters["FLOP/s"] = benchmark::Counter(attention_flops() * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionForward)->Arg(0)->Arg(1)->ArgName("causal")->UseRealTime()->Unit(benchmark::kMillisecond);

// Forward and backward: the backward does twice the forward's products.
void BM_AttentionForwardBackward(benchmark::State& state) {
  Tensor q = randn({kBatch, kHeads, kSeq, kHeadDim}), k = randn_like(q), v = randn_like(q);
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_(true);
  const Tensor grad = randn_like(q);
  for (auto _ : state) {
    scaled_dot_product_attention(q, k, v, {.dropout_p = 0.1}).backward(grad);
    for (Tensor* t : {&q, &k, &v}) t->mutable_grad() = Tensor();
  }
  state.counters["FLOP/s"] = benchmark::Counter(3 * attention_flops() * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionForwardBackward)->UseRealTime()->Unit(benchmark::kMillisecond);

// Reads the [4096, 256] output gradient and the ids, adds into the [8192, 256] table gradient
// (zeroed first: part of the op).
void BM_EmbeddingBackward(benchmark::State& state) {
  Tensor weight = randn({kVocab, kModel});
  weight.requires_grad_(true);
  const Tensor ids = randint(0, kVocab, {kBatch, kSeq});
  const Tensor grad = randn({kBatch, kSeq, kModel});
  const Tensor out = embedding(weight, ids);
  for (auto _ : state) {
    out.backward(grad, /*retain_graph=*/true);
    weight.mutable_grad() = Tensor();
  }
  const double bytes = (2.0 * kBatch * kSeq * kModel + kVocab * kModel) * 4 + kBatch * kSeq * 8;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * static_cast<double>(state.iterations())));
}
BENCHMARK(BM_EmbeddingBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One AdamW step over the reference classifier's parameters: reads parameter, gradient and two
// moments, writes parameter and moments (7 float32 per parameter).
void BM_AdamWStep(benchmark::State& state) {
  nn::TransformerClassifierOptions options;
  options.vocab_size = kVocab;
  options.max_len = kSeq;
  options.num_classes = 4;
  options.num_layers = 4;
  options.layer = {.d_model = kModel, .num_heads = kHeads, .d_ff = 4 * kModel};
  nn::TransformerClassifier model(options);
  int64_t count = 0;
  for (Tensor& p : model.parameters()) {
    p.mutable_grad() = randn_like(p);
    count += p.numel();
  }
  nn::AdamW optimizer(model.parameters());
  for (auto _ : state) optimizer.step();
  state.SetBytesProcessed(static_cast<int64_t>(7.0 * 4 * static_cast<double>(count) *
                                               static_cast<double>(state.iterations())));
  state.counters["parameters"] = static_cast<double>(count);
}
BENCHMARK(BM_AdamWStep)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
