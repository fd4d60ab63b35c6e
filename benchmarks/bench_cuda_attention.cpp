// Fused attention on CUDA (cuda/attention/attention.cu) against the composed ops on the same GPU, at the
// sizes the GPU speed figures name: batch 32, 4 heads, head dim 64 at length 128 (the
// classifier's), and longer sequences (1,024 to 4,096) where the composed form's L x S scores
// dominate memory. float32: the fused cases once as float32 (the float32-tile kernel) and once with
// TF32 allowed (argument `tf32`: cuda::set_allow_tf32, under which the mma.sync kernels take
// float32 on TF32 tensor cores, where they are compiled); the composed form in float32 only.
//
// Then bfloat16 at the sizes of the bar: batch 16, 16 heads, head dim 64 at lengths 1,024
// and 4,096 and head dim 128 at 2,048, on each path in turn (argument `path`); float16 at the same
// sizes on the default mma.sync tiles and the WMMA path (F16 in the names): 2 to 5, the
// mma.sync kernels (cuda/attention/flash_attention_forward.cuh and flash_attention_backward.cuh),
// the forward with each tile shape of cuda/attention/flash_attention_plan.h's list, as
// EMBER_ATTENTION_FLASH_TILE chooses, and the backward on its default tile; 1, the WMMA path
// (cuda/attention/attention_tensor_cores.cu), as EMBER_ATTENTION_FLASH=0 leaves it; 0, the
// float32-tile kernel, as EMBER_ATTENTION_TENSOR_CORES=0 does. Forward + backward also in the
// deterministic mode (EMBER_ATTENTION_DETERMINISTIC: dQ by its own pass) on the default tiles.
//
// PyTorch's SDPA is timed at the same cases, on the same GPU and in the same check, by
// benchmarks/side_by_side/torch_attention.py; scripts/gpu_summary.py sets the two side by side.
//
// FLOPs are counted as FlashAttention-2's benchmarks count them (and torch_attention.py does):
// forward 4 B H L S E (q k^T and weights v), backward 2.5 times the forward (its five products,
// the recomputed scores included), so forward + backward 3.5 times; halved when causal. Each
// iteration ends with a device synchronisation, so the time is the kernels'.
//
//   ./build/benchmarks/bench_cuda_attention --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   ./build/benchmarks/bench_cuda_attention --benchmark_filter=Bf16
//
// Without a GPU every case is skipped with a message.
#include <benchmark/benchmark.h>

#include <utility>
#include <vector>

#include "ember.h"
#ifdef EMBER_WITH_CUDA
#include "cuda/attention/attention_tensor_core_plan.h"
#include "cuda/attention/flash_attention_plan.h"
#endif

using namespace ember;

namespace {

constexpr int64_t kHeads = 4, kHeadDim = 64;

// Forward + backward over forward, in FlashAttention-2's count.
constexpr double kForwardBackwardFlops = 3.5;

double attention_flops(int64_t batch, int64_t length, bool causal, int64_t heads = kHeads,
                       int64_t head_dim = kHeadDim) {
  const double full = 4.0 * static_cast<double>(batch * heads) * static_cast<double>(length) *
                      static_cast<double>(length) * static_cast<double>(head_dim);
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

// Arguments: fused or composed, causal or not, length, batch, TF32 allowed or not.
void BM_CudaAttentionForward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool fused = state.range(0) != 0, causal = state.range(1) != 0;
  const int64_t length = state.range(2), batch = state.range(3);
  const cuda::AllowTf32Scope tf32(state.range(4) != 0);
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
  const cuda::AllowTf32Scope tf32(state.range(4) != 0);
  const TensorOptions on_gpu = TensorOptions(kFloat32).device(Device::cuda(0));
  Tensor q = randn({batch, length, kHeads * kHeadDim}, on_gpu), k = randn_like(q), v = randn_like(q);
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_(true);
  const Tensor grad = randn({batch, kHeads, length, kHeadDim}, on_gpu);
  for (auto _ : state) {
    attention(fused, split_heads(q), split_heads(k), split_heads(v), causal).backward(grad);
    for (Tensor* t : {&q, &k, &v}) t->mutable_grad() = Tensor();
    cuda::synchronize();
  }
  const double flops = kForwardBackwardFlops * attention_flops(batch, length, causal);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The classifier's shape, fused and composed; then long sequences, fused only (the composed
// form's [32, 4, 4096, 4096] float32 scores alone would take 8 GiB).
void attention_cases(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"fused", "causal", "len", "batch", "tf32"});
  for (const int64_t tf32 : {0, 1}) {
    for (const int64_t causal : {0, 1}) bench->Args({1, causal, 128, 32, tf32});
  }
  for (const int64_t causal : {0, 1}) bench->Args({0, causal, 128, 32, 0});
  for (const int64_t length : {1024, 2048, 4096}) {
    for (const int64_t tf32 : {0, 1}) {
      for (const int64_t causal : {0, 1}) bench->Args({1, causal, length, 32, tf32});
    }
  }
  bench->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_CudaAttentionForward)->Apply(attention_cases);
BENCHMARK(BM_CudaAttentionForwardBackward)->Apply(attention_cases);

constexpr int64_t kBf16Batch = 16, kBf16Heads = 16;

// One forward path for one case (CUDA builds only: elsewhere every case skips): 0 the float32-tile
// kernel, 1 the WMMA path, 2 + t the mma.sync forward with tile t. Restores the settings after.
#ifdef EMBER_WITH_CUDA
class AttentionPath {
 public:
  explicit AttentionPath(int64_t path)
      : tensor_cores_(path != 0),
        flash_before_(cuda::attention_flash_allowed()),
        tile_before_(cuda::flash_forward_tile_choice()) {
    cuda::set_attention_flash_allowed(path >= 2);
    if (path >= 2) cuda::set_flash_forward_tile_choice(static_cast<int>(path - 2));
  }
  ~AttentionPath() {
    cuda::set_attention_flash_allowed(flash_before_);
    cuda::set_flash_forward_tile_choice(tile_before_);
  }
  AttentionPath(const AttentionPath&) = delete;
  AttentionPath& operator=(const AttentionPath&) = delete;

 private:
  cuda::AttentionTensorCoresScope tensor_cores_;
  bool flash_before_;
  int tile_before_;
};
constexpr int64_t kFlashTilePaths = cuda::kFlashCompiledTiles;
#else
struct AttentionPath {
  explicit AttentionPath(int64_t) {}
};
constexpr int64_t kFlashTilePaths = 1;
#endif

// Arguments: the path (AttentionPath), causal or not, length, head dim. [B, H, L, E] of a 16-bit
// dtype.
void time_16_bit_forward(benchmark::State& state, DType dtype) {
  if (skip_without_gpu(state)) return;
  const AttentionPath path(state.range(0));
  const bool causal = state.range(1) != 0;
  const int64_t length = state.range(2), head_dim = state.range(3);
  NoGradGuard no_grad;
  const TensorOptions on_gpu = TensorOptions(dtype).device(Device::cuda(0));
  const Tensor q = randn({kBf16Batch, kBf16Heads, length, head_dim}, on_gpu), k = randn_like(q), v = randn_like(q);
  for (auto _ : state) {
    benchmark::DoNotOptimize(scaled_dot_product_attention(q, k, v, {.is_causal = causal}));
    cuda::synchronize();
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      attention_flops(kBf16Batch, length, causal, kBf16Heads, head_dim) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

void BM_CudaAttentionBf16Forward(benchmark::State& state) { time_16_bit_forward(state, kBFloat16); }
void BM_CudaAttentionF16Forward(benchmark::State& state) { time_16_bit_forward(state, kFloat16); }

// Forward + backward of one 16-bit case on whichever path the settings choose.
void time_16_bit_forward_backward(benchmark::State& state, DType dtype, bool causal, int64_t length,
                                  int64_t head_dim) {
  const TensorOptions on_gpu = TensorOptions(dtype).device(Device::cuda(0));
  Tensor q = randn({kBf16Batch, kBf16Heads, length, head_dim}, on_gpu), k = randn_like(q), v = randn_like(q);
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_(true);
  const Tensor grad = randn_like(q);
  for (auto _ : state) {
    scaled_dot_product_attention(q, k, v, {.is_causal = causal}).backward(grad);
    for (Tensor* t : {&q, &k, &v}) t->mutable_grad() = Tensor();
    cuda::synchronize();
  }
  const double flops = kForwardBackwardFlops * attention_flops(kBf16Batch, length, causal, kBf16Heads, head_dim);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_CudaAttentionBf16ForwardBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const AttentionPath path(state.range(0));
  time_16_bit_forward_backward(state, kBFloat16, state.range(1) != 0, state.range(2), state.range(3));
}

void BM_CudaAttentionF16ForwardBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const AttentionPath path(state.range(0));
  time_16_bit_forward_backward(state, kFloat16, state.range(1) != 0, state.range(2), state.range(3));
}

// Head dim 64 at 1,024 and 4,096, and 128 at 2,048 (the bar), on the given paths.
void sixteen_bit_cases(benchmark::internal::Benchmark* bench, const std::vector<int64_t>& paths) {
  bench->ArgNames({"path", "causal", "len", "dim"});
  for (const int64_t path : paths) {
    for (const auto& [length, head_dim] : {std::pair<int64_t, int64_t>{1024, 64}, {4096, 64}, {2048, 128}}) {
      for (const int64_t causal : {0, 1}) bench->Args({path, causal, length, head_dim});
    }
  }
  bench->UseRealTime()->Unit(benchmark::kMillisecond);
}

// bfloat16 on every path: each compiled mma.sync tile, the WMMA path, the float32-tile kernel.
void bf16_cases(benchmark::internal::Benchmark* bench) {
  std::vector<int64_t> paths;
  for (int64_t tile = 0; tile < kFlashTilePaths; ++tile) paths.push_back(2 + tile);
  paths.push_back(1);
  paths.push_back(0);
  sixteen_bit_cases(bench, paths);
}

// float16 on the default mma.sync tiles and the WMMA path (the tiles' ranking is bf16's: the
// kernels differ only in the mma instruction's operand type).
void f16_cases(benchmark::internal::Benchmark* bench) { sixteen_bit_cases(bench, {2, 1}); }

BENCHMARK(BM_CudaAttentionBf16Forward)->Apply(bf16_cases);
BENCHMARK(BM_CudaAttentionBf16ForwardBackward)->Apply(bf16_cases);
BENCHMARK(BM_CudaAttentionF16Forward)->Apply(f16_cases);
BENCHMARK(BM_CudaAttentionF16ForwardBackward)->Apply(f16_cases);

#ifdef EMBER_WITH_CUDA
// The deterministic mode on the mma.sync path's default tiles (dQ by its own pass, the scores and
// dP computed once more): what it costs against BM_CudaAttentionBf16ForwardBackward/path:2.
void BM_CudaAttentionBf16ForwardBackwardDeterministic(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const AttentionPath path(2);
  const cuda::AttentionDeterministicScope deterministic(true);
  time_16_bit_forward_backward(state, kBFloat16, state.range(0) != 0, state.range(1), state.range(2));
}
BENCHMARK(BM_CudaAttentionBf16ForwardBackwardDeterministic)
    ->ArgNames({"causal", "len", "dim"})
    ->Args({0, 1024, 64})
    ->Args({1, 1024, 64})
    ->Args({0, 2048, 128})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
#endif

}  // namespace

BENCHMARK_MAIN();
