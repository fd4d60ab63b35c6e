// The transformer-specific ops at the reference classifier's sizes (batch 32, sequence 128,
// d_model 256, 4 heads, vocabulary 8192), forward and backward, with FLOP or byte counters:
// attention, the embedding's backward (a scatter-add into the table), and one AdamW step over
// the classifier's 5.3 million parameters.
//
// Attention runs through the fused kernels (fused:1) and through the composed ops (fused:0).
//
//   OMP_NUM_THREADS=2 ./build/benchmarks/bench_transformer_ops --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "ember.h"

using namespace ember;

namespace {

constexpr int64_t kBatch = 32, kHeads = 4, kSeq = 128, kHeadDim = 64, kVocab = 8192, kModel = 256;

// Q K^T and weights @ V: 2 * 2 * L * S * E per head, forward.
double attention_flops(int64_t seq) { return 4.0 * kBatch * kHeads * seq * seq * kHeadDim; }

// The fused kernels (scaled_dot_product_attention) or the composed ops (the _with_weights
// form), picked by the benchmark's first argument.
Tensor attention(bool fused, const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  return fused ? scaled_dot_product_attention(q, k, v, options)
               : scaled_dot_product_attention_with_weights(q, k, v, options).output;
}

// [batch, seq, d_model] -> [batch, heads, seq, head_dim], a view, as MultiHeadAttention splits heads.
Tensor split_heads(const Tensor& x) { return x.view({kBatch, x.size(1), kHeads, kHeadDim}).transpose(1, 2); }
Tensor merge_heads(const Tensor& x) { return x.transpose(1, 2).reshape({kBatch, x.size(2), kModel}); }

// Arguments: fused or composed, causal or not, and the sequence length (the classifier's
// 128, the encoder-decoder's 64).
void BM_AttentionForward(benchmark::State& state) {
  const bool fused = state.range(0) != 0, causal = state.range(1) != 0;
  const int64_t seq = state.range(2);
  NoGradGuard no_grad;
  const Tensor q = split_heads(randn({kBatch, seq, kModel})), k = split_heads(randn({kBatch, seq, kModel})),
               v = split_heads(randn({kBatch, seq, kModel}));
  for (auto _ : state) {
    // Merging the heads back is part of the cost: a copy unless the output is laid out for it.
    benchmark::DoNotOptimize(merge_heads(attention(fused, q, k, v, {.is_causal = causal})));
  }
  state.counters["FLOP/s"] = benchmark::Counter(attention_flops(seq) * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionForward)
    ->ArgsProduct({{1, 0}, {0, 1}, {kSeq, 64}})
    ->ArgNames({"fused", "causal", "seq"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Forward and backward, with dropout 0.1 on the weights, from projections split into heads to
// their gradients; the backward does twice the forward's products.
void BM_AttentionForwardBackward(benchmark::State& state) {
  const bool fused = state.range(0) != 0, causal = state.range(1) != 0;
  const int64_t seq = state.range(2);
  Tensor q = randn({kBatch, seq, kModel}), k = randn_like(q), v = randn_like(q);
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_(true);
  const Tensor grad = randn_like(q);
  for (auto _ : state) {
    merge_heads(attention(fused, split_heads(q), split_heads(k), split_heads(v),
                          {.dropout_p = 0.1, .is_causal = causal}))
        .backward(grad);
    for (Tensor* t : {&q, &k, &v}) t->mutable_grad() = Tensor();
  }
  state.counters["FLOP/s"] = benchmark::Counter(3 * attention_flops(seq) * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionForwardBackward)
    ->ArgsProduct({{1, 0}, {0, 1}, {kSeq, 64}})
    ->ArgNames({"fused", "causal", "seq"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Reads the [4096, 256] output gradient and the ids, adds into the [8192, 256] table gradient
// (zeroed first: part of the op).
void BM_EmbeddingBackward(benchmark::State& state) {
  Tensor weight = randn({kVocab, kModel});
  weight.requires_grad_(true);
  const Tensor ids = randint(0, kVocab, {kBatch, kSeq});
  const Tensor grad = randn({kBatch, kSeq, kModel});
  const Tensor out = embedding(weight, ids);
  for (auto _ : state) {
    out.backward(grad, {.retain_graph = true});
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
