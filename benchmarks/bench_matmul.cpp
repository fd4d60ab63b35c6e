// ember's matmul and linear against a direct cblas_sgemm call on the same shapes: a square
// product and the three products of a linear layer (forward, dX and dW in backward); and
// matmul on bfloat16 and float16 operands beside float32 at transformer shapes (a projection,
// and a batch of attention-score products): bfloat16 and float16 on ember's own gemms on the
// instruction set in use (core/cpu/isa.h: bfloat16 in pairs on AVX512-BF16, both widened onto
// float32 FMAs on AVX2 and AVX-512), or on the portable rung by widening the operands to float32
// for sgemm and rounding the product once. EMBER_CPU_ISA times a lower rung:
//   OMP_NUM_THREADS=2 ./build/benchmarks/bench_matmul --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true
//   EMBER_CPU_ISA=portable OMP_NUM_THREADS=2 ./build/benchmarks/bench_matmul --benchmark_filter=_as
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <string>

#include "ember.h"

namespace {

using ember::Tensor;

// C [m, n] = op(A) op(B), with op(A) [m, k] and op(B) [k, n]; A is stored [k, m] when
// transposed, B [n, k].
struct Product {
  std::string name;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

void set_flops(benchmark::State& state, const Product& p) {
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * static_cast<double>(p.m * p.n * p.k) *
                                                     static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

Tensor operand(int64_t rows, int64_t cols, bool transposed) {
  return transposed ? ember::randn({cols, rows}).t() : ember::randn({rows, cols});
}

void cblas_product(benchmark::State& state, const Product& p) {
  const Tensor a = p.trans_a ? ember::randn({p.k, p.m}) : ember::randn({p.m, p.k});
  const Tensor b = p.trans_b ? ember::randn({p.n, p.k}) : ember::randn({p.k, p.n});
  Tensor c = ember::zeros({p.m, p.n});
  const int lda = static_cast<int>(a.sizes()[1]), ldb = static_cast<int>(b.sizes()[1]);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans, p.trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), 1.0f, a.data_ptr<float>(), lda,
                b.data_ptr<float>(), ldb, 0.0f, c.data_ptr<float>(), static_cast<int>(p.n));
    benchmark::DoNotOptimize(c.data_ptr<float>());
    benchmark::ClobberMemory();
  }
  set_flops(state, p);
}

void ember_matmul(benchmark::State& state, const Product& p) {
  const Tensor a = operand(p.m, p.k, p.trans_a), b = operand(p.k, p.n, p.trans_b);
  for (auto _ : state) {
    Tensor c = ember::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr<float>());
  }
  set_flops(state, p);
}

// linear(x, W) = x W^T: the forward product of a layer with W [out, in] stored row-major.
void ember_linear(benchmark::State& state, const Product& p) {
  const Tensor x = ember::randn({p.m, p.k}), weight = ember::randn({p.n, p.k});
  for (auto _ : state) {
    Tensor y = ember::linear(x, weight);
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
  set_flops(state, p);
}

// A linear layer with x [4096, 256], W [1024, 256], gradient g [4096, 1024].
const Product kProducts[] = {
    {"square_512", 512, 512, 512, false, false},
    {"4096x256_by_256x1024", 4096, 1024, 256, false, false},
    {"linear_forward_xWt", 4096, 1024, 256, false, true},
    {"linear_dX_gW", 4096, 256, 1024, false, false},
    {"linear_dW_gTx", 1024, 256, 4096, true, false},
};

// The same product with operands of `dtype`: float32, or a 16-bit format.
void ember_matmul_as(benchmark::State& state, const Product& p, ember::DType dtype) {
  const Tensor a = operand(p.m, p.k, p.trans_a).to(dtype), b = operand(p.k, p.n, p.trans_b).to(dtype);
  for (auto _ : state) {
    Tensor c = ember::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_flops(state, p);
}

// `batch` products of p's shape at once, as attention's scores q k^T for batch * heads matrices.
void ember_batched_matmul_as(benchmark::State& state, const Product& p, int64_t batch, ember::DType dtype) {
  const Tensor a = ember::randn({batch, p.m, p.k}).to(dtype), b = ember::randn({batch, p.k, p.n}).to(dtype);
  for (auto _ : state) {
    Tensor c = ember::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  Product total = p;
  total.m *= batch;
  set_flops(state, total);
}

// A projection of 4096 tokens of width 512, and 32 attention-score products (heads times
// sequences) of 128 queries by 128 keys with heads of 64.
const Product kProjection{"4096x512_by_512x512", 4096, 512, 512, false, false};
const Product kScores{"32x_128x64_by_64x128", 128, 128, 64, false, false};
constexpr int64_t kScoresBatch = 32;

// Wall time: BLAS runs on several threads, and CPU time would count only the calling one.
void add(const std::string& name, void (*run)(benchmark::State&, const Product&), const Product& p) {
  benchmark::RegisterBenchmark(name.c_str(), run, p)->Unit(benchmark::kMillisecond)->UseRealTime();
}

int register_all() {
  for (const Product& p : kProducts) {
    add("cblas_sgemm/" + p.name, cblas_product, p);
    add("ember_matmul/" + p.name, ember_matmul, p);
    if (p.trans_b) add("ember_linear/" + p.name, ember_linear, p);
    // The same product in bfloat16 (ember's own gemm), beside sgemm's: a linear layer's three
    // products as a bf16 step runs them.
    benchmark::RegisterBenchmark(("ember_matmul/" + p.name + "/bfloat16").c_str(), ember_matmul_as, p,
                                 ember::kBFloat16)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (const ember::DType dtype : {ember::kFloat32, ember::kBFloat16, ember::kFloat16}) {
    const std::string suffix = "/" + std::string(ember::dtype_name(dtype));
    benchmark::RegisterBenchmark(("ember_matmul/" + kProjection.name + suffix).c_str(), ember_matmul_as, kProjection,
                                 dtype)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("ember_matmul/" + kScores.name + suffix).c_str(), ember_batched_matmul_as, kScores,
                                 kScoresBatch, dtype)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
