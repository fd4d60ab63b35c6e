// One cuBLAS call per matrix product on the GPU, whatever the batch layout: products whose
// batch dims do not merge to one stride (heads split off a projection as views) go through a
// batched call over pointer arrays computed on the device. Checked against the CPU, and by
// counting cuBLAS calls (ember::cuda::cublas_calls()) in single products and in warm training
// steps, whose count must not grow with the batch.
#include "parity.h"

namespace ember::testing::cuda {
namespace {

// Products over layouts that exercise each form: merged strided-batched, broadcast, and
// non-mergeable batches (split heads, a permuted batch, a broadcast dim in the middle).
TEST_CASE("products over batch layouts that do not merge match the CPU, forward and backward") {
  for (const DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const double tolerance = dtype == kFloat32 ? kReductionTolerance : 1e-12;
    auto leaf = [&](const Shape& shape) { return randn(shape, TensorOptions(dtype).requires_grad(true)); };
    // q and k as heads of one packed projection [B, L, 3, H, E]: q k^T over [B, H].
    check_op_parity(
        [](const Inputs& in) {
          const Tensor packed = in[0];  // [B, L, 3 * H * E] with H = 3, E = 8
          const Tensor heads = packed.view({4, 6, 3, 3, 8});
          const Tensor q = heads.select(2, 0).transpose(1, 2), k = heads.select(2, 1).transpose(1, 2);
          return matmul(q, k.transpose(-2, -1));
        },
        {leaf({4, 6, 72})}, tolerance, "split heads q k^T");
    check_op_parity(
        [](const Inputs& in) {
          const Tensor v = in[1].view({4, 6, 3, 8}).transpose(1, 2);  // [B, H, L, E], a view
          return matmul(in[0], v);
        },
        {leaf({4, 3, 5, 6}), leaf({4, 6, 24})}, tolerance, "weights times split-head v");
    check_op_parity([](const Inputs& in) { return matmul(in[0].permute({1, 0, 2, 3}), in[1]); },
                    {leaf({3, 2, 5, 7}), leaf({2, 3, 7, 4})}, tolerance, "permuted batch");
    check_op_parity([](const Inputs& in) { return matmul(in[0].expand({2, 3, 5, 7}), in[1]); },
                    {leaf({2, 1, 5, 7}), leaf({2, 3, 7, 4})}, tolerance, "batch broadcast in the middle");
  }
}

TEST_CASE("every product is one cuBLAS call, whatever its batch layout") {
  const TensorOptions on_gpu = TensorOptions().device(kGPU);
  const Tensor packed = randn({8, 16, 3 * 4 * 32}, on_gpu);
  const Tensor heads = packed.view({8, 16, 3, 4, 32});
  const Tensor q = heads.select(2, 0).transpose(1, 2), k = heads.select(2, 1).transpose(1, 2);
  const std::vector<std::pair<std::string, std::function<Tensor()>>> products = {
      {"2-D", [&] { return matmul(randn({64, 32}, on_gpu), randn({32, 48}, on_gpu)); }},
      {"contiguous batch", [&] { return matmul(randn({5, 7, 64, 32}, on_gpu), randn({5, 7, 32, 16}, on_gpu)); }},
      {"linear on a 3-D input", [&] { return linear(randn({8, 16, 32}, on_gpu), randn({24, 32}, on_gpu)); }},
      {"split heads q k^T (32 matrices)", [&] { return matmul(q, k.transpose(-2, -1)); }},
      {"permuted batch", [&] { return matmul(randn({3, 2, 5, 7}, on_gpu).permute({1, 0, 2, 3}), randn({2, 3, 7, 4}, on_gpu)); }},
  };
  for (const auto& [name, product] : products) {
    CAPTURE(name);
    const int64_t before = ember::cuda::cublas_calls();
    const Tensor out = product();
    CHECK(ember::cuda::cublas_calls() - before == 1);
    CHECK(std::isfinite(out.sum().item<double>()));
  }
}

// The same layouts in bfloat16 and float16: cublasGemmStridedBatchedEx and cublasGemmBatchedEx
// (CUDA_R_16BF / CUDA_R_16F operands, float32 accumulation), still one call per product.
TEST_CASE("bfloat16 and float16 products over every batch layout match the CPU in one cuBLAS call each") {
  auto leaf = [](const Shape& shape) { return randn(shape, TensorOptions().requires_grad(true)); };
  for (const DType dtype : kHalfDTypes) {
    CAPTURE(dtype);
    check_half_op_parity(
        [](const Inputs& in) {
          const Tensor heads = in[0].view({4, 6, 3, 3, 8});
          const Tensor q = heads.select(2, 0).transpose(1, 2), k = heads.select(2, 1).transpose(1, 2);
          return matmul(q, k.transpose(-2, -1));
        },
        {leaf({4, 6, 72})}, dtype, "split heads q k^T");
    check_half_op_parity([](const Inputs& in) { return matmul(in[0], in[1].view({4, 6, 3, 8}).transpose(1, 2)); },
                         {leaf({4, 3, 5, 6}), leaf({4, 6, 24})}, dtype, "weights times split-head v");
    check_half_op_parity([](const Inputs& in) { return matmul(in[0].permute({1, 0, 2, 3}), in[1]); },
                         {leaf({3, 2, 5, 7}), leaf({2, 3, 7, 4})}, dtype, "permuted batch");
    check_half_op_parity([](const Inputs& in) { return matmul(in[0].expand({2, 3, 5, 7}), in[1]); },
                         {leaf({2, 1, 5, 7}), leaf({2, 3, 7, 4})}, dtype, "batch broadcast in the middle");

    const Tensor packed = randn({8, 16, 3 * 4 * 32}).to(dtype).to(kGPU);
    const Tensor heads = packed.view({8, 16, 3, 4, 32});
    const Tensor q = heads.select(2, 0).transpose(1, 2), k = heads.select(2, 1).transpose(1, 2);
    const Tensor batch = randn({5, 7, 64, 32}).to(dtype).to(kGPU), other = randn({5, 7, 32, 16}).to(dtype).to(kGPU);
    for (const auto& [name, product] : std::vector<std::pair<std::string, std::function<Tensor()>>>{
             {"contiguous batch (strided-batched)", [&] { return matmul(batch, other); }},
             {"split heads q k^T (pointer arrays)", [&] { return matmul(q, k.transpose(-2, -1)); }}}) {
      CAPTURE(name);
      const int64_t before = ember::cuda::cublas_calls();
      const Tensor out = product();
      CHECK(ember::cuda::cublas_calls() - before == 1);
      CHECK(out.dtype() == dtype);
      CHECK(std::isfinite(out.sum().item<double>()));
    }
  }
}

// cuBLAS's 16-bit batched products over pointer arrays need every matrix pointer 16-byte
// aligned. Heads of 6 or 12 elements split off a projection put matrices at 12- or 24-byte
// steps: those products are made on contiguous copies (strided-batched, which cuBLAS checks
// itself), still one call, with the CPU's result.
TEST_CASE("16-bit products over split heads whose matrices are not 16-byte aligned match the CPU in one call") {
  auto leaf = [](const Shape& shape) { return randn(shape, TensorOptions().requires_grad(true)); };
  for (const DType dtype : kHalfDTypes) {
    for (const int64_t head : {int64_t{6}, int64_t{12}, int64_t{8}}) {
      CAPTURE(dtype);
      CAPTURE(head);
      const auto q_k = [head](const Inputs& in) {
        const Tensor heads = in[0].view({4, 6, 3, 3, head});
        const Tensor q = heads.select(2, 0).transpose(1, 2), k = heads.select(2, 1).transpose(1, 2);
        return matmul(q, k.transpose(-2, -1));
      };
      check_half_op_parity(q_k, {leaf({4, 6, 9 * head})}, dtype, "split heads q k^T");
      const Tensor packed = randn({4, 6, 9 * head}).to(dtype).to(kGPU);
      const int64_t before = ember::cuda::cublas_calls();
      const Tensor out = q_k({packed});
      CHECK(ember::cuda::cublas_calls() - before == 1);
      CHECK(std::isfinite(out.sum().item<double>()));
    }
  }
}

// The partial sums of a 16-bit product stay float32 whatever algorithm cuBLAS picks (split-K
// included: CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION). A float16 row of 2^17 ones then
// 2^17 minus ones against ones: every partial sum of the first half passes float16's largest
// value, 65504, but the product is 0 in float32, as on the CPU. Added in float16 anywhere, it
// would be inf or NaN.
TEST_CASE("a float16 product whose partial sums pass float16's range but whose result fits is exact") {
  constexpr int64_t kHalf = int64_t{1} << 17;
  const Tensor signs = cat({ones({16, kHalf}), neg(ones({16, kHalf}))}, 1);  // [16, 2^18]
  const Tensor a = signs.to(kFloat16), b = ones({2 * kHalf, 8}).to(kFloat16);
  const Tensor cpu = matmul(a, b);
  const Tensor gpu = matmul(a.to(kGPU), b.to(kGPU)).cpu();
  CHECK(sum(abs(cpu.to(kFloat32))).item<double>() == 0.0);
  CHECK(sum(abs(gpu.to(kFloat32))).item<double>() == 0.0);  // not inf, not NaN
  // The same in bfloat16, whose range holds the sums, is exact too: the sums are integers below 2^24.
  const Tensor gpu_bf16 = matmul(signs.to(kBFloat16).to(kGPU), ones({2 * kHalf, 8}).to(kBFloat16).to(kGPU)).cpu();
  CHECK(sum(abs(gpu_bf16.to(kFloat32))).item<double>() == 0.0);
}

// The cuBLAS calls of one warm step of a small classifier with heads split as views.
int64_t cublas_calls_per_warm_step(int64_t batch, int64_t* forward_products) {
  manual_seed(7);
  auto model = std::make_shared<nn::TransformerClassifier>(nn::TransformerClassifierOptions{
      .vocab_size = 64,
      .max_len = 32,
      .num_classes = 3,
      .num_layers = 2,
      .layer = {.d_model = 64, .num_heads = 4, .d_ff = 128, .dropout = 0.1}});
  model->to(kGPU);
  nn::AdamW optimizer(model->parameters(), {.lr = 1e-3});
  const Tensor ids = randint(1, 64, {batch, 24}).to(kGPU), labels = randint(0, 3, {batch}).to(kGPU);
  auto step = [&] {
    optimizer.zero_grad();
    const Tensor loss = cross_entropy(model->forward(ids), labels);
    loss.backward();
    nn::clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();
    return loss;
  };
  step().item<double>();  // cold
  {
    NoGradGuard no_grad;
    const int64_t before = ember::cuda::cublas_calls();
    model->forward(ids);
    *forward_products = ember::cuda::cublas_calls() - before;
  }
  const int64_t before = ember::cuda::cublas_calls();
  step().item<double>();
  return ember::cuda::cublas_calls() - before;
}

TEST_CASE("a warm training step makes a bounded number of cuBLAS calls, the same at every batch size") {
  int64_t forward_small = 0, forward_large = 0;
  const int64_t small = cublas_calls_per_warm_step(4, &forward_small);
  const int64_t large = cublas_calls_per_warm_step(32, &forward_large);
  MESSAGE("cuBLAS calls per warm step: " << small << " at batch 4, " << large << " at batch 32 (forward alone: "
                                         << forward_small << ")");
  CHECK(forward_small > 0);
  CHECK(small == large);
  CHECK(forward_small == forward_large);
  // A product's backward is at most two products (one per operand).
  CHECK(small <= 3 * forward_small);
}

}  // namespace
}  // namespace ember::testing::cuda
