// Parity of the transformer ops on CUDA with the CPU, forward and backward: matmul, bmm and
// linear (cuBLAS, transposed and broadcast operands), softmax, log_softmax, layer_norm,
// cross_entropy, embedding, dropout (the same mask), index ops, sort and topk, and
// scaled_dot_product_attention with its masks; then the kernels called directly on poisoned
// outputs, so an element a kernel forgets to write shows up. Each family in float32 and float64,
// and in bfloat16 and float16 (at the end of the file).
#include <cmath>
#include <limits>

#include "core/ops/grad_unscale.h"
#include "cuda/attention/attention_tensor_core_plan.h"
#include "cuda/attention/flash_attention_plan.h"
#include "helpers.h"
#include "op_parity.h"

namespace ember::testing::cuda {
namespace {

constexpr double kProduct = kReductionTolerance;
constexpr double kElementwise = kElementwiseTolerance;

TEST_CASE("matmul, bmm and linear match the CPU, transposes and broadcast batches included") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    auto product = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
    check_op("matmul 2-D", {leaf({17, 33}, dtype), leaf({33, 9}, dtype)}, product, kProduct);
    check_op("matmul a^T b^T", {leaf({33, 17}, dtype), leaf({9, 33}, dtype)},
             [](const std::vector<Tensor>& in) { return matmul(in[0].t(), in[1].t()); }, kProduct);
    check_op("matmul N-D x 2-D", {leaf({3, 5, 7, 16}, dtype), leaf({16, 6}, dtype)}, product, kProduct);
    check_op("matmul broadcast batch", {leaf({2, 1, 7, 16}, dtype), leaf({3, 16, 5}, dtype)}, product, kProduct);
    check_op("matmul vector", {leaf({16}, dtype), leaf({4, 16, 5}, dtype)}, product, kProduct);
    check_op("matmul matrix-vector", {leaf({6, 16}, dtype), leaf({16}, dtype)}, product, kProduct);
    check_op("bmm", {leaf({4, 7, 16}, dtype), leaf({4, 16, 5}, dtype)},
             [](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); }, kProduct);
    check_op("bmm transposed views", {leaf({4, 16, 7}, dtype), leaf({4, 5, 16}, dtype)},
             [](const std::vector<Tensor>& in) { return bmm(in[0].transpose(1, 2), in[1].transpose(1, 2)); },
             kProduct);
    check_op("linear", {leaf({2, 5, 24}, dtype), leaf({12, 24}, dtype), leaf({12}, dtype)},
             [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, kProduct);
    check_op("linear without bias", {leaf({5, 24}, dtype), leaf({12, 24}, dtype)},
             [](const std::vector<Tensor>& in) { return linear(in[0], in[1], Tensor()); }, kProduct);
  }
}

TEST_CASE("softmax and log_softmax match the CPU along the last dim and along an inner dim") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    for (const int64_t dim : {-1, 1}) {
      INFO("dtype " << dtype_name(dtype) << ", dim " << dim);
      check_op("softmax", {leaf({3, 37, 300}, dtype)},
               [dim](const std::vector<Tensor>& in) { return softmax(mul(in[0], 4.0), dim); }, kReductionTolerance);
      check_op("log_softmax", {leaf({3, 37, 300}, dtype)},
               [dim](const std::vector<Tensor>& in) { return log_softmax(mul(in[0], 4.0), dim); },
               kReductionTolerance);
    }
  }
  // Masked entries (-inf) give exactly 0, as attention's masks need.
  Tensor scores = randn({4, 10});
  const Tensor masked = gt(arange(10.0).unsqueeze(0), 6.0);
  scores = masked_fill(scores, masked, -std::numeric_limits<double>::infinity());
  check_parity(softmax(scores.to(kGPU), -1), softmax(scores, -1), kReductionTolerance, "softmax with -inf");
}

TEST_CASE("layer_norm matches the CPU, with and without weight and bias") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    check_op("layer_norm", {leaf({4, 9, 96}, dtype), leaf({96}, dtype), leaf({96}, dtype)},
             [](const std::vector<Tensor>& in) { return layer_norm(add(in[0], 3.0), {96}, in[1], in[2]); },
             kReductionTolerance);
    check_op("layer_norm over two dims", {leaf({5, 6, 40}, dtype)},
             [](const std::vector<Tensor>& in) { return layer_norm(in[0], {6, 40}); }, kReductionTolerance);
    check_op("layer_norm, many rows", {leaf({700, 33}, dtype), leaf({33}, dtype), leaf({33}, dtype)},
             [](const std::vector<Tensor>& in) { return layer_norm(in[0], {33}, in[1], in[2]); },
             kReductionTolerance);
    // A training step's shape: grad_weight and grad_bias summed over 32 slices of 65 rows or fewer,
    // 8 groups of columns (cuda/common/column_sum_plan.h), the partials then added slice by slice.
    check_op("layer_norm, a step's rows", {leaf({2049, 256}, dtype), leaf({256}, dtype), leaf({256}, dtype)},
             [](const std::vector<Tensor>& in) { return layer_norm(in[0], {256}, in[1], in[2]); },
             kReductionTolerance);
  }
}

TEST_CASE("matrix products with an empty inner dim, no rows or an empty batch match the CPU") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    auto product = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
    // k == 0: an empty sum, so zeros (beta 0) without cuBLAS; linear keeps its bias (beta 1).
    check_op("matmul, k = 0", {leaf({4, 0}, dtype), leaf({0, 3}, dtype)}, product, kProduct);
    check_op("bmm, k = 0", {leaf({2, 4, 0}, dtype), leaf({2, 0, 3}, dtype)},
             [](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); }, kProduct);
    check_op("linear, no input features", {leaf({4, 0}, dtype), leaf({3, 0}, dtype), leaf({3}, dtype)},
             [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }, kProduct);
    check_op("matmul, no rows", {leaf({0, 5}, dtype), leaf({5, 3}, dtype)}, product, kProduct);
    check_op("matmul, empty batch", {leaf({0, 4, 5}, dtype), leaf({5, 3}, dtype)}, product, kProduct);
    check_op("bmm, empty batch", {leaf({0, 4, 5}, dtype), leaf({0, 5, 3}, dtype)},
             [](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); }, kProduct);
  }
}

TEST_CASE("softmax, log_softmax and layer_norm match the CPU on rows longer than a block and more rows than the grid") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    // 1000 > 256 threads: every thread folds several elements. 5000 rows > the grid's blocks:
    // a block takes several rows. 5000 columns along dim 0: the one-thread-per-column kernel.
    check_op("softmax, rows of 1000", {leaf({6, 1000}, dtype)},
             [](const std::vector<Tensor>& in) { return softmax(mul(in[0], 4.0), -1); }, kReductionTolerance);
    check_op("log_softmax, 5000 rows", {leaf({5000, 24}, dtype)},
             [](const std::vector<Tensor>& in) { return log_softmax(mul(in[0], 4.0), -1); }, kReductionTolerance);
    check_op("softmax, 5000 columns", {leaf({7, 5000}, dtype)},
             [](const std::vector<Tensor>& in) { return softmax(in[0], 0); }, kReductionTolerance);
    check_op("layer_norm, rows of 1000", {leaf({5, 1000}, dtype), leaf({1000}, dtype), leaf({1000}, dtype)},
             [](const std::vector<Tensor>& in) { return layer_norm(add(in[0], 2.0), {1000}, in[1], in[2]); },
             kReductionTolerance);
    check_op("layer_norm, 5000 rows", {leaf({5000, 16}, dtype), leaf({16}, dtype), leaf({16}, dtype)},
             [](const std::vector<Tensor>& in) { return layer_norm(in[0], {16}, in[1], in[2]); },
             kReductionTolerance);
    // No rows at all: empty outputs, and zero gradients for the weight and bias.
    check_op("layer_norm, no rows", {leaf({0, 8}, dtype), leaf({8}, dtype), leaf({8}, dtype)},
             [](const std::vector<Tensor>& in) { return layer_norm(in[0], {8}, in[1], in[2]); },
             kReductionTolerance);
    check_op("softmax, no rows", {leaf({0, 8}, dtype)},
             [](const std::vector<Tensor>& in) { return softmax(in[0], -1); }, kReductionTolerance);
  }
}

TEST_CASE("cross_entropy matches the CPU with ignore_index, label smoothing and every reduction") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    Tensor targets = randint(0, 50, {6, 7});
    targets = where(gt(rand({6, 7}), 0.8), full({6, 7}, -100.0, kInt64), targets);  // some ignored
    for (const double smoothing : {0.0, 0.1}) {
      for (const Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
        INFO("label_smoothing " << smoothing << ", reduction " << static_cast<int>(reduction));
        check_op("cross_entropy", {leaf({6, 7, 50}, dtype), targets},
                 [=](const std::vector<Tensor>& in) {
                   return cross_entropy(mul(in[0], 3.0), in[1], {.label_smoothing = smoothing, .reduction = reduction});
                 },
                 kReductionTolerance);
      }
    }
  }
}

TEST_CASE("embedding matches the CPU, repeated ids and the padding row included") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    const Tensor ids = randint(0, 11, {5, 13});  // 65 ids over 11 rows: many repeats
    check_op("embedding", {leaf({11, 24}, dtype), ids},
             [](const std::vector<Tensor>& in) { return embedding(in[0], in[1], std::nullopt); }, kElementwise);
    check_op("embedding with padding_idx", {leaf({11, 24}, dtype), ids},
             [](const std::vector<Tensor>& in) { return embedding(in[0], in[1], 3); }, kElementwise);
  }
}

TEST_CASE("dropout draws the same mask on both devices under manual_seed") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    for (const int64_t numel : {int64_t{1}, int64_t{7}, int64_t{4099}}) {
      INFO("dtype " << dtype_name(dtype) << ", numel " << numel);
      manual_seed(seed);
      const Tensor x = leaf({numel}, dtype);
      const Tensor x_gpu = x.detach().to(kGPU).requires_grad_(true);
      manual_seed(seed + 1);
      const Tensor cpu_out = dropout(x, 0.3);
      manual_seed(seed + 1);
      const Tensor gpu_out = dropout(x_gpu, 0.3);
      // The same mask: the same zeros, and the kept values scaled alike.
      CHECK(eq(gpu_out.cpu(), 0.0).to_vector<bool>() == eq(cpu_out, 0.0).to_vector<bool>());
      check_parity(gpu_out, cpu_out, kElementwise, "dropout forward");
      const Tensor grad = randn({numel}, dtype);
      cpu_out.backward(grad);
      gpu_out.backward(grad.to(kGPU));
      check_parity(x_gpu.grad(), x.grad(), kElementwise, "dropout backward");
    }
  }
}

TEST_CASE("index_select and gather match the CPU, with their scatter-add backwards") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    const Tensor rows = randint(0, 9, {14});
    check_op("index_select dim 0", {leaf({9, 5, 3}, dtype), rows},
             [](const std::vector<Tensor>& in) { return index_select(in[0], 0, in[1]); }, kElementwise);
    check_op("index_select dim 1", {leaf({4, 9, 3}, dtype), rows},
             [](const std::vector<Tensor>& in) { return index_select(in[0], 1, in[1]); }, kElementwise);
    const Tensor index = randint(0, 6, {4, 6, 5});
    check_op("gather", {leaf({4, 6, 5}, dtype), index},
             [](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); }, kElementwise);
    // A strided input (a transposed view) and an index smaller than the input.
    check_op("gather strided", {leaf({5, 6, 4}, dtype), randint(0, 6, {3, 6, 2})},
             [](const std::vector<Tensor>& in) { return gather(in[0].transpose(0, 2), 1, in[1]); }, kElementwise);
  }
  const Tensor values = randint(0, 100, {6, 8});
  check_parity(index_select(values.to(kGPU), 1, tensor<int64_t>({7, 0, 7}).to(kGPU)),
               index_select(values, 1, tensor<int64_t>({7, 0, 7})), 0.0, "index_select int64");
}

TEST_CASE("sort and topk match the CPU: values, positions and their gradient") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    for (const bool descending : {false, true}) {
      const Tensor x = leaf({5, 300}, dtype);
      const ValuesIndices cpu = sort(x, -1, descending);
      const ValuesIndices gpu = sort(x.detach().to(kGPU), -1, descending);
      check_parity(gpu.values, cpu.values, 0.0, "sort values");
      check_parity(gpu.indices, cpu.indices, 0.0, "sort indices");
    }
    check_op("topk", {leaf({6, 1000}, dtype)},
             [](const std::vector<Tensor>& in) { return topk(in[0], 5).values; }, kElementwise);
    check_op("topk along dim 0, smallest", {leaf({40, 6}, dtype)},
             [](const std::vector<Tensor>& in) { return topk(in[0], 3, 0, false).values; }, kElementwise);
  }
  // Ties keep their order (a stable sort), and NaN sorts as the largest value.
  const Tensor ties = tensor<float>({2, 1, 2, NAN, 1, 2}, {1, 6});
  for (const bool descending : {false, true}) {
    const ValuesIndices cpu = sort(ties, -1, descending);
    const ValuesIndices gpu = sort(ties.to(kGPU), -1, descending);
    CHECK(gpu.indices.to_vector<int64_t>() == cpu.indices.to_vector<int64_t>());
  }
}

TEST_CASE("sort, argsort and topk of int64 and bool tensors match the CPU, ties in stable order") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const Tensor integers = randint(-5, 5, {4, 50});  // ten values over fifty places: many ties
  const Tensor mask = gt(randn({3, 40}), 0.0);
  for (const bool descending : {false, true}) {
    INFO("descending " << descending);
    for (const Tensor& x : {integers, mask}) {
      const std::string what = std::string(dtype_name(x.dtype())) + " sort";
      const ValuesIndices cpu = sort(x, -1, descending), gpu = sort(x.to(kGPU), -1, descending);
      check_parity(gpu.values, cpu.values, 0.0, what + " values");
      check_parity(gpu.indices, cpu.indices, 0.0, what + " indices");
      check_parity(argsort(x.to(kGPU), 0, descending), argsort(x, 0, descending), 0.0, what + " argsort along dim 0");
    }
    const ValuesIndices cpu = topk(integers, 7, -1, descending), gpu = topk(integers.to(kGPU), 7, -1, descending);
    check_parity(gpu.values, cpu.values, 0.0, "int64 topk values");
    check_parity(gpu.indices, cpu.indices, 0.0, "int64 topk indices");
  }
  const ValuesIndices none = topk(integers.to(kGPU), 0);  // k == 0: empty results, no launch
  CHECK(none.values.sizes() == Shape{4, 0});
  CHECK(none.indices.sizes() == Shape{4, 0});
}

TEST_CASE("scaled_dot_product_attention matches the CPU with causal, boolean, additive and padding masks") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  auto attention = [](AttentionOptions options) {
    return [options](const std::vector<Tensor>& in) {
      AttentionOptions on_device = options;
      if (on_device.attn_mask.defined()) on_device.attn_mask = on_device.attn_mask.to(in[0].device());
      return scaled_dot_product_attention(in[0], in[1], in[2], on_device);
    };
  };
  const std::vector<Tensor> inputs{leaf({2, 3, 7, 16}), leaf({2, 3, 9, 16}), leaf({2, 3, 9, 8})};
  check_op("attention", inputs, attention({}), kReductionTolerance);
  check_op("attention, causal", {leaf({2, 3, 9, 16}), leaf({2, 3, 9, 16}), leaf({2, 3, 9, 8})},
           attention({.is_causal = true}), kReductionTolerance);
  // Padding: the last three keys of batch row 1 are masked (true = may attend).
  Tensor may_attend = ones({2, 1, 1, 9}, kBool);
  may_attend = logical_and(may_attend, logical_not(logical_and(eq(arange(2.0).view({2, 1, 1, 1}), 1.0),
                                                               ge(arange(9.0).view({1, 1, 1, 9}), 6.0))));
  check_op("attention, bool padding mask", inputs, attention({.attn_mask = may_attend}), kReductionTolerance);
  check_op("attention, additive mask", inputs, attention({.attn_mask = randn({7, 9})}), kReductionTolerance);

  // Operands on two devices are refused before any kernel could read the wrong memory.
  const Tensor q = randn({2, 7, 16}).to(kGPU), k = randn({2, 9, 16}), v = randn({2, 9, 8});
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q, k.to(kGPU), v), "scaled_dot_product_attention",
                        "one device", "cuda:0", "cpu");
  CHECK_THROWS_WITH_ALL(scaled_dot_product_attention(q.cpu(), k, v, {.attn_mask = ones({7, 9}, kBool).to(kGPU)}),
                        "scaled_dot_product_attention", "attn_mask is on cuda:0 but q is on cpu");
}

// The fused CUDA kernels (cuda/attention/attention.cu) walk 64 x 64 tiles and 64 head dims at a time:
// lengths that are not multiples of 64, L != S both ways, head dims over 64 (the chunked path),
// heads split off a projection as views, masks, and dropout, each against the CPU's fused
// kernel in both dtypes.
// scaled_dot_product_attention with `options` as a function of q, k and v: the mask moved to q's
// device (an additive one in q's dtype), and with dropout the generator seeded first, so that
// every call draws the same mask.
std::function<Tensor(const std::vector<Tensor>&)> fused_attention(AttentionOptions options,
                                                                   uint64_t dropout_seed = 0) {
  return [options, dropout_seed](const std::vector<Tensor>& in) {
    AttentionOptions on_device = options;
    if (on_device.attn_mask.defined()) {
      const Tensor& mask = on_device.attn_mask;
      on_device.attn_mask = mask.to(in[0].device()).to(mask.dtype() == kBool ? kBool : in[0].dtype());
    }
    if (options.dropout_p > 0) manual_seed(dropout_seed);
    return scaled_dot_product_attention(in[0], in[1], in[2], on_device);
  };
}

// Causal attention of q, k and v split off one projection [B, L, 3 * H * E] (the input) as head
// views [B, H, L, E]: batch strides (L * 3HE, E), row stride 3HE.
std::function<Tensor(const std::vector<Tensor>&)> causal_attention_of_projection(int64_t heads, int64_t head_dim) {
  return [heads, head_dim](const std::vector<Tensor>& in) {
    const int64_t batch = in[0].size(0), length = in[0].size(1), width = heads * head_dim;
    auto split = [&](int64_t part) {
      return transpose(view(narrow(in[0], 2, part * width, width), {batch, length, heads, head_dim}), 1, 2);
    };
    return scaled_dot_product_attention(split(0), split(1), split(2), {.is_causal = true});
  };
}

TEST_CASE("fused CUDA attention matches the CPU over tile edges, wide heads, views, masks and dropout") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  // The options' attention of q, k and v, on whichever device they are.
  const auto attention = [](AttentionOptions options, uint64_t dropout_seed = 0) {
    return fused_attention(options, dropout_seed);
  };
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    check_op("fused attention, L 130, S 200", {leaf({2, 2, 130, 64}, dtype), leaf({2, 2, 200, 64}, dtype),
                                                leaf({2, 2, 200, 64}, dtype)},
             attention({}), kReductionTolerance);
    check_op("fused attention, causal, L 150 > S 100", {leaf({3, 150, 32}, dtype), leaf({3, 100, 32}, dtype),
                                                         leaf({3, 100, 16}, dtype)},
             attention({.is_causal = true}), kReductionTolerance);
    check_op("fused attention, causal, L 70 < S 140", {leaf({3, 70, 32}, dtype), leaf({3, 140, 32}, dtype),
                                                        leaf({3, 140, 48}, dtype)},
             attention({.is_causal = true}), kReductionTolerance);
    check_op("fused attention, E 80 and Ev 136 (head dims in chunks)",
             {leaf({2, 65, 80}, dtype), leaf({2, 77, 80}, dtype), leaf({2, 77, 136}, dtype)}, attention({}),
             kReductionTolerance);
    check_op("fused attention, heads split off a projection", {leaf({4, 96, 3 * 4 * 32}, dtype)},
             causal_attention_of_projection(4, 32), kReductionTolerance);
    // Sequence 1 may see its first 37 keys only: its second key tile is all padding.
    const Tensor padding = logical_not(
        logical_and(eq(arange(2.0).view({2, 1, 1, 1}), 1.0), ge(arange(100.0).view({1, 1, 1, 100}), 37.0)));
    const std::vector<Tensor> inputs{leaf({2, 3, 90, 32}, dtype), leaf({2, 3, 100, 32}, dtype),
                                     leaf({2, 3, 100, 32}, dtype)};
    check_op("fused attention, bool padding over several key tiles", inputs, attention({.attn_mask = padding}),
             kReductionTolerance);
    check_op("fused attention, additive mask broadcast over the batch", inputs,
             attention({.attn_mask = randn({90, 100}, dtype)}), kReductionTolerance);
    check_op("fused attention, dropout", inputs, attention({.dropout_p = 0.2}, seed + 1), kReductionTolerance);
    check_op("fused attention, dropout and causal", inputs, attention({.dropout_p = 0.3, .is_causal = true}, seed + 2),
             kReductionTolerance);
    // A sequence with no key at all: NaN rows on both devices, and zero gradients through the mask.
    const Tensor no_key = expand(logical_not(eq(arange(2.0).view({2, 1, 1, 1}), 1.0)), {2, 1, 1, 100});
    check_op("fused attention, a sequence with no key", inputs, attention({.attn_mask = no_key}),
             kReductionTolerance);
  }
}

// In float64 the kernels' dropout scale 1 / (1 - p) must be the CPU's, computed from the double
// p: one computed from p rounded to float is off by 3.7e-9 relative at p = 0.2, which a
// float64 comparison sees. Sums over 32 keys differ in order only: 1e-13 is far above that and
// far below 3.7e-9.
TEST_CASE("fused CUDA attention with dropout in float64 matches the CPU to float64 precision") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const std::vector<Tensor> inputs{leaf({2, 3, 40, 16}, kFloat64), leaf({2, 3, 32, 16}, kFloat64),
                                   leaf({2, 3, 32, 16}, kFloat64)};
  for (const double p : {0.2, 0.1, 1.0 / 3.0}) {
    INFO("p " << p);
    check_op_parity(fused_attention({.dropout_p = p}, seed + 1), inputs, 1e-13, "float64 attention with dropout",
                    1e-13);
  }
}

// Head dims are split into 64-column chunks along the grid's z, which CUDA caps at 65,535
// blocks: past that (head dims over 4,194,240) the kernels loop over chunks. The test lowers
// the cap to 1 and 2 so that the loop runs at small sizes.
TEST_CASE("fused CUDA attention loops over head-dim chunks past the grid's z limit") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  // Restores CUDA's limit however the case ends.
  struct ColumnBlockLimit {
    explicit ColumnBlockLimit(int64_t limit) { ember::cuda::set_attention_column_block_limit(limit); }
    ~ColumnBlockLimit() { ember::cuda::set_attention_column_block_limit(65535); }
  };
  for (const int64_t limit : {int64_t{1}, int64_t{2}}) {
    INFO("column block limit " << limit);
    const ColumnBlockLimit lowered(limit);
    for (const DType dtype : {kFloat32, kFloat64}) {
      INFO("dtype " << dtype_name(dtype));
      check_op("fused attention, E 200 and Ev 136 in chunks", {leaf({2, 65, 200}, dtype), leaf({2, 77, 200}, dtype),
                                                                leaf({2, 77, 136}, dtype)},
               fused_attention({}), kReductionTolerance);
      check_op("fused attention, causal, E 80 and Ev 260, dropout",
               {leaf({2, 70, 80}, dtype), leaf({2, 70, 80}, dtype), leaf({2, 70, 260}, dtype)},
               fused_attention({.dropout_p = 0.2, .is_causal = true}, seed + 3), kReductionTolerance);
    }
  }
}

TEST_CASE("fused CUDA attention matches the composed form on the GPU and keeps memory linear in the length") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const Tensor q = randn({2, 4, 300, 64}).to(kGPU).requires_grad_(true);
  const Tensor k = randn({2, 4, 300, 64}).to(kGPU).requires_grad_(true);
  const Tensor v = randn({2, 4, 300, 64}).to(kGPU).requires_grad_(true);
  const Tensor fused = scaled_dot_product_attention(q, k, v, {.is_causal = true});
  // The weights form is always composed: matmul, masked_fill, softmax.
  const Tensor composed = scaled_dot_product_attention_with_weights(q, k, v, {.is_causal = true}).output;
  check_parity(fused, composed.cpu(), kReductionTolerance, "fused against composed on the GPU");

  // Forward and backward at length 2,048: the composed form would hold [B, H, L, S] float32
  // scores, softmax and their gradients (3 x 64 MiB and more); the fused kernels keep the
  // log-sum-exp [B, H, L] and one row term.
  const int64_t length = 2048;
  const Tensor long_q = randn({2, 4, length, 64}).to(kGPU).requires_grad_(true);
  const Tensor long_k = randn({2, 4, length, 64}).to(kGPU).requires_grad_(true);
  const Tensor long_v = randn({2, 4, length, 64}).to(kGPU).requires_grad_(true);
  ember::cuda::synchronize();
  const int64_t before = ember::cuda::memory_stats().allocated_bytes;
  ember::cuda::reset_peak_memory_stats();
  sum(scaled_dot_product_attention(long_q, long_k, long_v)).backward();
  ember::cuda::synchronize();
  const int64_t peak = ember::cuda::memory_stats().peak_allocated_bytes - before;
  const int64_t one_operand = 2 * 4 * length * 64 * 4;  // bytes of q
  const int64_t scores = 2 * 4 * length * length * 4;
  INFO("peak above the inputs: " << peak << " bytes; one [B, H, L, S] float32 tensor: " << scores);
  CHECK(peak < 8 * one_operand);  // out, grad_out, three gradients, lse and row terms
  CHECK(peak < scores / 4);
}

// Three steps of the optimizer `make_optimizer` builds, from the same parameters and the same
// gradients on both devices, then the parameters compared.
template <class MakeOptimizer>
void compare_optimizer_steps(const std::vector<Tensor>& initial, uint64_t seed, const std::string& what,
                             MakeOptimizer make_optimizer, double tolerance = kElementwise) {
  auto run = [&](Device device) {
    std::vector<Tensor> params;
    for (const Tensor& p : initial) params.push_back(p.to(device).clone().requires_grad_(true));
    auto optimizer = make_optimizer(params);
    for (int step = 0; step < 3; ++step) {
      manual_seed(seed + step);
      for (Tensor& p : params) p.mutable_grad() = random_normal(p.sizes(), p.dtype()).to(device);
      optimizer.step();
    }
    return params;
  };
  const std::vector<Tensor> cpu = run(kCPU), gpu = run(kGPU);
  for (size_t i = 0; i < cpu.size(); ++i) check_parity(gpu[i], cpu[i], tolerance, what);
}

TEST_CASE("AdamW, Adam and SGD take the same steps on both devices") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  // Three parameters of different sizes (one larger than a block's grid-stride step).
  const std::vector<Tensor> initial{randn({300, 70}), randn({70}), randn({3, 4}, kFloat64)};
  compare_optimizer_steps(initial, seed, "AdamW",
                          [](std::vector<Tensor> p) { return nn::AdamW(p, {.lr = 1e-2, .weight_decay = 0.1}); });
  compare_optimizer_steps(initial, seed, "Adam",
                          [](std::vector<Tensor> p) { return nn::Adam(p, {.lr = 1e-2, .weight_decay = 0.1}); });
  compare_optimizer_steps(initial, seed, "SGD", [](std::vector<Tensor> p) {
    return nn::SGD(p, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  });
  compare_optimizer_steps(initial, seed, "SGD nesterov", [](std::vector<Tensor> p) {
    return nn::SGD(p, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  });
  compare_optimizer_steps(initial, seed, "SGD plain", [](std::vector<Tensor> p) { return nn::SGD(p, {.lr = 0.1}); });
}

TEST_CASE("the fused optimizer steps cover more parameters than one launch takes, and every option") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  // 31 parameters: more than one launch's list (24) of float32, float64 in between, and an
  // empty one, whose list entry must be skipped without touching memory.
  std::vector<Tensor> initial;
  for (int i = 0; i < 30; ++i) initial.push_back(randn({i % 5 + 1, 7 + i}, i % 4 == 0 ? kFloat64 : kFloat32));
  initial.push_back(randn({0, 4}));
  compare_optimizer_steps(initial, seed, "AdamW, long list",
                          [](std::vector<Tensor> p) { return nn::AdamW(p, {.lr = 1e-2, .weight_decay = 0.1}); });
  compare_optimizer_steps(initial, seed, "Adam without weight decay",
                          [](std::vector<Tensor> p) { return nn::Adam(p, {.lr = 1e-2, .betas = {0.8, 0.99}}); });
  compare_optimizer_steps(initial, seed, "SGD with dampening", [](std::vector<Tensor> p) {
    return nn::SGD(p, {.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01});
  });
  compare_optimizer_steps(initial, seed, "SGD nesterov with weight decay", [](std::vector<Tensor> p) {
    return nn::SGD(p, {.lr = 0.1, .momentum = 0.5, .nesterov = true, .weight_decay = 0.01});
  });
}

// The kernels on outputs filled with NaN beforehand: every element must be written.
TEST_CASE("the kernels write every element of their outputs") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const Tensor x = randn({6, 40}).to(kGPU);
  {
    const Tensor out = poisoned({6, 40});
    kernels::softmax[kGPU](out, x, 6, 40, 1, false);
    check_parity(out, softmax(x.cpu(), -1), kReductionTolerance, "softmax kernel");
    const Tensor columns = poisoned({6, 40});
    kernels::softmax[kGPU](columns, x, 2, 3, 40, true);
    check_parity(columns, log_softmax(x.cpu().view({2, 3, 40}), 1).view({6, 40}), kReductionTolerance,
                 "log_softmax kernel, inner dim");
  }
  {
    const Tensor y = poisoned({6, 40}), mean = poisoned({6}), rstd = poisoned({6});
    kernels::layer_norm[kGPU](y, mean, rstd, x, Tensor(), Tensor(), 1e-5);
    check_parity(y, layer_norm(x.cpu(), {40}), kReductionTolerance, "layer_norm kernel");
    const Tensor grad_x = poisoned({6, 40}), grad_w = poisoned({40}), grad_b = poisoned({40});
    const Tensor ones_weight = ones({40}).to(kGPU);
    kernels::layer_norm_backward[kGPU](grad_x, grad_w, grad_b, x, x, mean, rstd, ones_weight);
    CHECK(all(isfinite(grad_x.cpu())).item<bool>());
    CHECK(all(isfinite(grad_w.cpu())).item<bool>());
    check_parity(grad_b, sum(x.cpu(), {0}), kReductionTolerance, "layer_norm grad_bias kernel");
  }
  {
    const Tensor targets = randint(0, 40, {6}).to(kGPU);
    const Tensor losses = poisoned({6}), row_max = poisoned({6}), log_sum = poisoned({6});
    kernels::cross_entropy[kGPU](losses, row_max, log_sum, x, targets, -100, 0.0);
    check_parity(losses, cross_entropy(x.cpu(), targets.cpu(), {.reduction = Reduction::None}), kReductionTolerance,
                 "cross_entropy kernel");
    const Tensor grad = poisoned({6, 40});
    kernels::cross_entropy_backward[kGPU](grad, ones({6}).to(kGPU), x, targets, row_max, log_sum, -100, 0.0);
    CHECK(all(isfinite(grad.cpu())).item<bool>());
  }
  {
    const Tensor ids = randint(0, 6, {9}).to(kGPU);
    const Tensor out = poisoned({9, 40});
    kernels::embedding[kGPU](out, x, ids);
    check_parity(out, embedding(x.cpu(), ids.cpu()), 0.0, "embedding kernel");
  }
  {
    const Tensor out = poisoned({6, 40});
    const PhiloxState state{seed, 5};
    kernels::dropout[kGPU](out, x, 0.5, state);
    // The CPU's forward also keeps the mask as bits (one int64 per 64 elements).
    const Tensor expected = empty({6, 40});
    const Tensor mask_bits = make_tensor({(6 * 40 + 63) / 64}, kInt64, kCPU);
    kernels::dropout_keeping_mask[kCPU](expected, mask_bits, x.cpu(), 0.5, state);
    check_parity(out, expected, 0.0, "dropout kernel");
  }
  {
    const Tensor out = poisoned({6, 9});
    kernels::gemm[kGPU](out, x, randn({40, 9}).to(kGPU), 0.0);
    CHECK(all(isfinite(out.cpu())).item<bool>());
  }
  {
    const Tensor values = poisoned({6, 4}), indices = full({6, 4}, -1.0, TensorOptions(kInt64).device(kGPU));
    kernels::sort[kGPU](values, indices, x, true);
    check_parity(values, topk(x.cpu(), 4).values, 0.0, "sort kernel");
    CHECK(indices.cpu().to_vector<int64_t>() == topk(x.cpu(), 4).indices.to_vector<int64_t>());
  }
}

// --- bfloat16 and float16 -----------------------------------------------------------------------
// Each op in 16 bits against the CPU in the same dtype, forward and backward, and against the
// float32 op on the GPU on the same rounded inputs, rounded (check_half_op_parity, parity.h).
// Inputs are drawn in float32 (scaled there when the op wants a spread) and rounded by the check.

using HalfOp = std::function<Tensor(const std::vector<Tensor>&)>;

TEST_CASE("matmul, bmm and linear match in bfloat16 and float16 (tensor cores, float32 accumulation)") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const HalfOp product = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  for (const DType dtype : kHalfDTypes) {
    check_half_op_parity(product, {leaf({17, 33}), leaf({33, 9})}, dtype, "matmul 2-D");
    check_half_op_parity([](const std::vector<Tensor>& in) { return matmul(in[0].t(), in[1].t()); },
                         {leaf({33, 17}), leaf({9, 33})}, dtype, "matmul a^T b^T");
    check_half_op_parity(product, {leaf({3, 5, 7, 16}), leaf({16, 6})}, dtype, "matmul N-D x 2-D");
    check_half_op_parity(product, {leaf({2, 1, 7, 16}), leaf({3, 16, 5})}, dtype, "matmul broadcast batch");
    check_half_op_parity(product, {leaf({16}), leaf({4, 16, 5})}, dtype, "matmul vector");
    check_half_op_parity(
        [](const std::vector<Tensor>& in) { return bmm(in[0].transpose(1, 2), in[1].transpose(1, 2)); },
        {leaf({4, 16, 7}), leaf({4, 5, 16})}, dtype, "bmm transposed views");
    check_half_op_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                         {leaf({2, 5, 24}), leaf({12, 24}), leaf({12})}, dtype, "linear");
    // k == 0: zeros without cuBLAS.
    check_half_op_parity(product, {leaf({4, 0}), leaf({0, 3})}, dtype, "matmul, k = 0");
    // 256 terms per output: float32 accumulation keeps the result to one rounding.
    check_half_op_parity(product, {leaf({64, 256}), leaf({256, 48})}, dtype, "matmul, k = 256");
  }
}

TEST_CASE("softmax, log_softmax and layer_norm match in bfloat16 and float16, forward and backward") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : kHalfDTypes) {
    for (const int64_t dim : {-1, 1}) {
      INFO("dim " << dim);
      const Tensor scores = as_leaf(mul(randn({3, 37, 300}), 4.0));
      check_half_op_parity([dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); }, {scores}, dtype,
                           "softmax");
      check_half_op_parity([dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }, {scores}, dtype,
                           "log_softmax");
    }
    check_half_op_parity([](const std::vector<Tensor>& in) { return softmax(in[0], -1); },
                         {as_leaf(mul(randn({6, 1000}), 4.0))}, dtype, "softmax, rows of 1000");
    check_half_op_parity([](const std::vector<Tensor>& in) { return softmax(in[0], 0); }, {leaf({7, 5000})}, dtype,
                         "softmax, 5000 columns");
    check_half_op_parity(
        [](const std::vector<Tensor>& in) { return layer_norm(in[0], {96}, in[1], in[2]); },
        {as_leaf(add(randn({4, 9, 96}), 3.0)), leaf({96}), leaf({96})}, dtype, "layer_norm");
    check_half_op_parity([](const std::vector<Tensor>& in) { return layer_norm(in[0], {6, 40}); },
                         {leaf({5, 6, 40})}, dtype, "layer_norm over two dims, no weight or bias");
    check_half_op_parity([](const std::vector<Tensor>& in) { return layer_norm(in[0], {1000}, in[1], in[2]); },
                         {leaf({5, 1000}), leaf({1000}), leaf({1000})}, dtype, "layer_norm, rows of 1000");
    check_half_op_parity([](const std::vector<Tensor>& in) { return layer_norm(in[0], {33}, in[1], in[2]); },
                         {leaf({700, 33}), leaf({33}), leaf({33})}, dtype, "layer_norm, many rows");
  }
}

TEST_CASE("cross_entropy matches in bfloat16 and float16 with ignore_index, label smoothing and every reduction") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  Tensor targets = randint(0, 50, {6, 7});
  targets = where(gt(rand({6, 7}), 0.8), full({6, 7}, -100.0, kInt64), targets);  // some ignored
  const Tensor logits = as_leaf(mul(randn({6, 7, 50}), 3.0));
  for (const DType dtype : kHalfDTypes) {
    for (const double smoothing : {0.0, 0.1}) {
      for (const Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
        INFO("label_smoothing " << smoothing << ", reduction " << static_cast<int>(reduction));
        check_half_op_parity(
            [=](const std::vector<Tensor>& in) {
              return cross_entropy(in[0], in[1], {.label_smoothing = smoothing, .reduction = reduction});
            },
            {logits, targets}, dtype, "cross_entropy");
      }
    }
  }
}

TEST_CASE("embedding, index_select and gather match in bfloat16 and float16; their backwards add in float32") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const Tensor ids = randint(0, 11, {5, 13});  // 65 ids over 11 rows: many repeats
  const Tensor rows = randint(0, 9, {14});
  const Tensor index = randint(0, 6, {4, 6, 5});
  for (const DType dtype : kHalfDTypes) {
    check_half_op_parity([](const std::vector<Tensor>& in) { return embedding(in[0], in[1], std::nullopt); },
                         {leaf({11, 24}), ids}, dtype, "embedding");
    check_half_op_parity([](const std::vector<Tensor>& in) { return embedding(in[0], in[1], 3); },
                         {leaf({11, 24}), ids}, dtype, "embedding with padding_idx");
    check_half_op_parity([](const std::vector<Tensor>& in) { return index_select(in[0], 1, in[1]); },
                         {leaf({4, 9, 3}), rows}, dtype, "index_select dim 1");
    check_half_op_parity([](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); },
                         {leaf({4, 6, 5}), index}, dtype, "gather");
    check_half_op_parity([](const std::vector<Tensor>& in) { return gather(in[0].transpose(0, 2), 1, in[1]); },
                         {leaf({5, 6, 4}), randint(0, 6, {3, 6, 2})}, dtype, "gather strided");
  }
}

TEST_CASE("dropout draws the float32 mask in bfloat16 and float16, on both devices") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  for (const DType dtype : kHalfDTypes) {
    const Tensor x = randn({4099}).to(dtype);
    manual_seed(seed);
    const Tensor cpu_out = dropout(x, 0.3);
    manual_seed(seed);
    const Tensor gpu_out = dropout(x.to(kGPU), 0.3);
    manual_seed(seed);
    const Tensor float32_out = dropout(x.to(kFloat32).to(kGPU), 0.3);
    CHECK(eq(gpu_out.cpu(), 0.0).to_vector<bool>() == eq(cpu_out, 0.0).to_vector<bool>());
    CHECK(eq(gpu_out.cpu(), 0.0).to_vector<bool>() == eq(float32_out.cpu(), 0.0).to_vector<bool>());
    check_parity(gpu_out, cpu_out, half_tolerance(dtype), "dropout " + std::string(dtype_name(dtype)));
    check_parity(gpu_out, float32_out.to(dtype), half_tolerance(dtype), "dropout against float32, rounded");
  }
}

TEST_CASE("sort and topk of bfloat16 and float16 match the CPU exactly, ties in stable order") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : kHalfDTypes) {
    // Rounded normal draws tie often, so the stable order is exercised throughout.
    const Tensor x = randn({5, 300}).to(dtype);
    for (const bool descending : {false, true}) {
      const ValuesIndices cpu = sort(x, -1, descending), gpu = sort(x.to(kGPU), -1, descending);
      check_parity(gpu.values, cpu.values, 0.0, "sort values");
      check_parity(gpu.indices, cpu.indices, 0.0, "sort indices");
    }
    check_half_op_parity([](const std::vector<Tensor>& in) { return topk(in[0], 5).values; }, {leaf({6, 1000})}, dtype,
                         "topk");
    const Tensor with_nan = tensor<float>({2, 1, 2, NAN, 1, 2}, {1, 6}).to(dtype);
    CHECK(sort(with_nan.to(kGPU), -1, true).indices.to_vector<int64_t>() ==
          sort(with_nan, -1, true).indices.to_vector<int64_t>());
  }
}

TEST_CASE("AdamW, Adam and SGD take the same steps on bfloat16 and float16 parameters on both devices") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : kHalfDTypes) {
    INFO("dtype " << dtype_name(dtype));
    // Three steps, each storing the parameter and its state rounded once: 3 roundings.
    const double tolerance = half_tolerance(dtype, 3);
    const std::vector<Tensor> initial{randn({300, 70}).to(dtype), randn({70}).to(dtype), randn({3, 4})};
    compare_optimizer_steps(
        initial, seed, "AdamW", [](std::vector<Tensor> p) { return nn::AdamW(p, {.lr = 1e-2, .weight_decay = 0.1}); },
        tolerance);
    compare_optimizer_steps(
        initial, seed, "Adam", [](std::vector<Tensor> p) { return nn::Adam(p, {.lr = 1e-2, .weight_decay = 0.1}); },
        tolerance);
    compare_optimizer_steps(
        initial, seed, "SGD",
        [](std::vector<Tensor> p) { return nn::SGD(p, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}); },
        tolerance);
    compare_optimizer_steps(
        initial, seed, "SGD nesterov",
        [](std::vector<Tensor> p) { return nn::SGD(p, {.lr = 0.1, .momentum = 0.9, .nesterov = true}); }, tolerance);
  }
}

// 16-bit q, k and v through the float32-tile kernel (the tensor-core path switched off): read as
// float into its tiles, with a float32 log-sum-exp and grad_q summed in float32; out and the
// gradients rounded once.
TEST_CASE("fused CUDA attention's float32-tile kernel matches in bfloat16 and float16: tile edges, wide heads, views, masks, dropout") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const ember::cuda::AttentionTensorCoresScope float32_tiles(false);
  // The options' attention of q, k and v, on whichever device they are.
  const auto attention = [](AttentionOptions options, uint64_t dropout_seed = 0) {
    return fused_attention(options, dropout_seed);
  };
  const Tensor padding = logical_not(
      logical_and(eq(arange(2.0).view({2, 1, 1, 1}), 1.0), ge(arange(100.0).view({1, 1, 1, 100}), 37.0)));
  for (const DType dtype : kHalfDTypes) {
    check_half_op_parity(attention({}), {leaf({2, 2, 130, 64}), leaf({2, 2, 200, 64}), leaf({2, 2, 200, 64})}, dtype,
                         "fused attention, L 130, S 200");
    check_half_op_parity(attention({.is_causal = true}), {leaf({3, 150, 32}), leaf({3, 100, 32}), leaf({3, 100, 16})},
                         dtype, "fused attention, causal, L 150 > S 100");
    check_half_op_parity(attention({}), {leaf({2, 65, 80}), leaf({2, 77, 80}), leaf({2, 77, 136})}, dtype,
                         "fused attention, E 80 and Ev 136 (head dims in chunks)");
    check_half_op_parity(causal_attention_of_projection(4, 32), {leaf({4, 96, 3 * 4 * 32})}, dtype,
                         "fused attention, heads split off a projection");
    const std::vector<Tensor> inputs{leaf({2, 3, 90, 32}), leaf({2, 3, 100, 32}), leaf({2, 3, 100, 32})};
    check_half_op_parity(attention({.attn_mask = padding}), inputs, dtype,
                         "fused attention, bool padding over several key tiles");
    // The mask rounded to 16 bits already, so that the float32 reference adds the same values.
    check_half_op_parity(attention({.attn_mask = randn({90, 100}).to(dtype).to(kFloat32)}), inputs, dtype,
                         "fused attention, additive mask broadcast over the batch");
    check_half_op_parity(attention({.dropout_p = 0.2}, seed + 1), inputs, dtype, "fused attention, dropout");
  }
}

// The tensor-core path (cuda/attention/attention_tensor_cores.cu), taken by 16-bit attention with E, Ev <=
// 128 on this GPU (compute capability 8.0 or more). Tolerances, from the unit roundoff u of the
// dtype (2^-8 bfloat16, 2^-11 float16; half_tolerance gives 2u per rounding):
// - forward: two roundings, the weights P rounded to 16 bits for the P v product, then out. Each
//   weight's rounding error is at most u relative to it, independent of the others, so in
//   out_i = sum_j P_ij v_j / l_i they add up as the rounding of out itself does: at most u
//   relative in norm, one rounding more than the float32-tile kernel;
// - gradients: four, the float32-tile kernel's three and one more: W = P f rounded for dV = W^T dO
//   and dS rounded for dK = scale dS^T q and dQ = scale dS k, each at most u relative to the
//   rounded element, adding up across the sum as above.
constexpr int kTensorCoreForwardRoundings = 2;
constexpr int kTensorCoreGradientRoundings = 4;

void check_tensor_core_attention(const std::function<Tensor(const std::vector<Tensor>&)>& op,
                                 const std::vector<Tensor>& inputs, DType dtype, const std::string& what) {
  check_half_op_parity(op, inputs, dtype, "tensor cores, " + what, kTensorCoreGradientRoundings,
                       kTensorCoreForwardRoundings);
}

// Each tensor-core path: the mma.sync kernels (cuda/attention/flash_attention_forward.cuh and
// _backward.cuh, with the same roundings as WMMA's) with each tile shape the build compiled, for the
// operands cp.async can copy (the others fall to WMMA within the same run); the default tile in the
// deterministic mode (dQ by flash_attention_grad_q.cuh); then the WMMA path alone
// (EMBER_ATTENTION_FLASH=0).
struct TensorCorePath {
  bool flash;
  int tile;
  bool deterministic = false;
};
std::vector<TensorCorePath> tensor_core_paths() {
  std::vector<TensorCorePath> paths;
  for (int tile = 0; tile < ember::cuda::kFlashCompiledTiles; ++tile) paths.push_back({true, tile});
  paths.push_back({true, 0, true});
  paths.push_back({false, 0});
  return paths;
}

TEST_CASE("fused CUDA attention on tensor cores matches the CPU in bfloat16 and float16") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const ember::cuda::AttentionTensorCoresScope tensor_cores(true);
  const auto attention = [](AttentionOptions options, uint64_t dropout_seed = 0) {
    return fused_attention(options, dropout_seed);
  };
  for (const TensorCorePath path : tensor_core_paths()) {
    INFO((path.flash ? "mma.sync kernels, tile " : "WMMA path ") << path.tile
                                                                    << (path.deterministic ? ", deterministic" : ""));
    const ember::cuda::AttentionFlashScope flash(path.flash, path.tile, path.tile);
    const ember::cuda::AttentionDeterministicScope deterministic(path.deterministic);
    for (const DType dtype : kHalfDTypes) {
      // Each head dim, with L != S and neither a multiple of the 64-row tiles.
      for (const int64_t head_dim : {16, 32, 64, 128}) {
        INFO("head dim " << head_dim);
        check_tensor_core_attention(
            attention({}), {leaf({2, 2, 70, head_dim}), leaf({2, 2, 130, head_dim}), leaf({2, 2, 130, head_dim})},
            dtype, "L 70, S 130");
        check_tensor_core_attention(attention({.is_causal = true}),
                                    {leaf({3, 150, head_dim}), leaf({3, 100, head_dim}), leaf({3, 100, head_dim})},
                                    dtype, "causal, L 150 > S 100");
      }
      // E != Ev, each padded to the compiled head dim (64, then 128); 20 and 36 are not multiples
      // of 8, so their rows are loaded element by element.
      check_tensor_core_attention(attention({.is_causal = true}),
                                  {leaf({3, 70, 32}), leaf({3, 140, 32}), leaf({3, 140, 48})}, dtype,
                                  "causal, L 70 < S 140, E 32, Ev 48");
      check_tensor_core_attention(attention({}), {leaf({2, 65, 20}), leaf({2, 77, 20}), leaf({2, 77, 36})}, dtype,
                                  "E 20, Ev 36");
      check_tensor_core_attention(attention({}), {leaf({2, 65, 80}), leaf({2, 129, 80}), leaf({2, 129, 112})}, dtype,
                                  "E 80, Ev 112");
      // Heads split off a projection (row stride 3 H E); q read through a transpose (column stride L).
      check_tensor_core_attention(causal_attention_of_projection(4, 64), {leaf({4, 96, 3 * 4 * 64})}, dtype,
                                  "heads split off a projection");
      check_tensor_core_attention(
          [](const std::vector<Tensor>& in) {
            return scaled_dot_product_attention(transpose(in[0], 1, 2), in[1], in[2]);
          },
          {leaf({2, 64, 90}), leaf({2, 100, 64}), leaf({2, 100, 64})}, dtype, "q transposed");
      // Masks, dropout, a sequence with no key at all (NaN rows, zero gradients through the mask).
      const Tensor padding = logical_not(
          logical_and(eq(arange(2.0).view({2, 1, 1, 1}), 1.0), ge(arange(100.0).view({1, 1, 1, 100}), 37.0)));
      const std::vector<Tensor> inputs{leaf({2, 3, 90, 64}), leaf({2, 3, 100, 64}), leaf({2, 3, 100, 64})};
      check_tensor_core_attention(attention({.attn_mask = padding}), inputs, dtype, "bool padding mask");
      check_tensor_core_attention(attention({.attn_mask = randn({90, 100}).to(dtype).to(kFloat32)}), inputs, dtype,
                                  "additive mask broadcast over the batch");
      check_tensor_core_attention(attention({.attn_mask = randn({2, 1, 90, 100}).to(dtype).to(kFloat32)}), inputs,
                                  dtype, "additive mask broadcast over the heads");
      check_tensor_core_attention(attention({.dropout_p = 0.2}, seed + 1), inputs, dtype, "dropout");
      check_tensor_core_attention(attention({.dropout_p = 0.3, .is_causal = true}, seed + 2), inputs, dtype,
                                  "dropout and causal");
      const Tensor no_key = expand(logical_not(eq(arange(2.0).view({2, 1, 1, 1}), 1.0)), {2, 1, 1, 100});
      check_tensor_core_attention(attention({.attn_mask = no_key}), inputs, dtype, "a sequence with no key");
      // Backward with some gradients not wanted (null in the kernel): v's only, then q's only.
      check_tensor_core_attention(attention({.is_causal = true}),
                                  {randn({2, 130, 64}), randn({2, 150, 64}), leaf({2, 150, 64})}, dtype,
                                  "only v requires grad");
      check_tensor_core_attention(attention({}), {leaf({2, 130, 64}), randn({2, 150, 64}), randn({2, 150, 64})}, dtype,
                                  "only q requires grad");
    }
  }
}

TEST_CASE("fused CUDA attention's deterministic backward gives the same bits on every run") {
  // Only the mma.sync kernels have the mode; without them (a build without EMBER_CUDA_FLASH) the
  // WMMA path runs, whose dQ is added by atomics.
  if (!ember::cuda::kFlashKernelsCompiled) {
    MESSAGE("the mma.sync kernels are not compiled in this build (EMBER_CUDA_FLASH=OFF): nothing to check");
    return;
  }
  const ember::cuda::AttentionTensorCoresScope tensor_cores(true);
  const ember::cuda::AttentionFlashScope flash(true);
  const ember::cuda::AttentionDeterministicScope deterministic(true);
  for (const DType dtype : kHalfDTypes) {
    // Many key blocks add into each row of dQ, in whatever order their blocks run when by atomics.
    const Tensor q = randn({2, 4, 700, 64}).to(dtype).to(kGPU), k = randn({2, 4, 900, 64}).to(dtype).to(kGPU);
    const Tensor v = randn({2, 4, 900, 64}).to(dtype).to(kGPU), upstream = randn({2, 4, 700, 64}).to(dtype).to(kGPU);
    std::vector<Tensor> first;
    for (int run = 0; run < 3; ++run) {
      std::vector<Tensor> leaves{q.detach().requires_grad_(true), k.detach().requires_grad_(true),
                                 v.detach().requires_grad_(true)};
      manual_seed(11);
      scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], {.dropout_p = 0.1, .is_causal = true})
          .backward(upstream);
      for (size_t i = 0; i < leaves.size(); ++i) {
        const Tensor grad = leaves[i].grad().to(kCPU).to(kFloat32);
        if (run == 0) {
          first.push_back(grad);
        } else {
          INFO("gradient " << i << ", run " << run);
          CHECK(max(abs(sub(grad, first[i]))).item<float>() == 0.0f);
        }
      }
    }
  }
}

// float32 on TF32 tensor cores: with allow_tf32 the mma.sync kernels take float32 attention, their
// products' operands rounded to TF32 (10 fraction bits, unit roundoff 2^-11 = 4.9e-4); the
// softmax, its sums and every accumulator stay float32. A few units of that on the outputs and
// gradients; a wrong fragment layout or k order would be off by about 1.
TEST_CASE("fused CUDA attention in float32 on TF32 tensor cores (allow_tf32) matches the CPU") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  constexpr double kTf32Tolerance = 5e-3;
  const ember::cuda::AllowTf32Scope allow_tf32(true);  // restored after, also if a check throws
  const auto attention = [](AttentionOptions options, uint64_t dropout_seed = 0) {
    return fused_attention(options, dropout_seed);
  };
  for (const bool deterministic_mode : {false, true}) {
    INFO((deterministic_mode ? "deterministic dQ pass" : "dQ by atomics"));
    const ember::cuda::AttentionFlashScope flash(true);
    const ember::cuda::AttentionDeterministicScope deterministic(deterministic_mode);
    check_op("TF32 attention, L 130, S 200, head dim 64",
             {leaf({2, 2, 130, 64}), leaf({2, 2, 200, 64}), leaf({2, 2, 200, 64})}, attention({}), kTf32Tolerance);
    check_op("TF32 attention, causal, head dim 128",
             {leaf({2, 300, 128}), leaf({2, 300, 128}), leaf({2, 300, 128})}, attention({.is_causal = true}),
             kTf32Tolerance);
    check_op("TF32 attention, causal, L 150 > S 100, E 32, Ev 16 (padded to 64)",
             {leaf({3, 150, 32}), leaf({3, 100, 32}), leaf({3, 100, 16})}, attention({.is_causal = true}),
             kTf32Tolerance);
    check_op("TF32 attention, E 80, Ev 112 (padded to 128)", {leaf({2, 65, 80}), leaf({2, 77, 80}), leaf({2, 77, 112})},
             attention({}), kTf32Tolerance);
    check_op("TF32 attention, heads split off a projection", {leaf({4, 96, 3 * 4 * 64})},
             causal_attention_of_projection(4, 64), kTf32Tolerance);
    const Tensor padding = logical_not(
        logical_and(eq(arange(2.0).view({2, 1, 1, 1}), 1.0), ge(arange(100.0).view({1, 1, 1, 100}), 37.0)));
    const std::vector<Tensor> inputs{leaf({2, 3, 90, 64}), leaf({2, 3, 100, 64}), leaf({2, 3, 100, 64})};
    check_op("TF32 attention, bool padding mask", inputs, attention({.attn_mask = padding}), kTf32Tolerance);
    check_op("TF32 attention, additive mask", inputs, attention({.attn_mask = randn({90, 100})}), kTf32Tolerance);
    check_op("TF32 attention, dropout and causal", inputs, attention({.dropout_p = 0.3, .is_causal = true}, seed + 4),
             kTf32Tolerance);
    const Tensor no_key = expand(logical_not(eq(arange(2.0).view({2, 1, 1, 1}), 1.0)), {2, 1, 1, 100});
    check_op("TF32 attention, a sequence with no key", inputs, attention({.attn_mask = no_key}), kTf32Tolerance);
  }
}

// The same calls on the GPU through the tensor-core kernels and through the float32-tile kernel
// (the path switched off, as EMBER_ATTENTION_TENSOR_CORES=0 does): outputs and every gradient,
// under the tensor-core tolerances above.
void check_tensor_cores_against_float32_tiles(const std::function<Tensor(const std::vector<Tensor>&)>& op,
                                              const std::vector<Tensor>& inputs, DType dtype, const std::string& what) {
  const std::string name = what + " in " + std::string(dtype_name(dtype));
  Tensor upstream;  // drawn once the output's shape is known; the same for both paths
  auto run = [&](bool tensor_cores) {
    const ember::cuda::AttentionTensorCoresScope path(tensor_cores);
    std::vector<Tensor> on_gpu;
    for (const Tensor& input : inputs) on_gpu.push_back(input.detach().to(dtype).to(kGPU).requires_grad_(true));
    const Tensor result = op(on_gpu);
    if (!upstream.defined()) upstream = randn(result.sizes()).to(dtype).to(kGPU);
    result.backward(upstream);
    std::vector<Tensor> outputs{result.detach()};
    for (const Tensor& input : on_gpu) outputs.push_back(input.grad());
    return outputs;
  };
  const std::vector<Tensor> tensor_cores = run(true);
  const std::vector<Tensor> float32_tiles = run(false);
  check_parity(tensor_cores[0], float32_tiles[0].cpu(), half_tolerance(dtype, kTensorCoreForwardRoundings),
               name + " (forward)");
  for (size_t k = 1; k < tensor_cores.size(); ++k) {
    check_parity(tensor_cores[k], float32_tiles[k].cpu(), half_tolerance(dtype, kTensorCoreGradientRoundings),
                 name + " (gradient of input " + std::to_string(k - 1) + ")");
  }
}

TEST_CASE("fused CUDA attention on tensor cores matches the float32-tile kernel on the GPU") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const auto attention = [](AttentionOptions options, uint64_t dropout_seed = 0) {
    return fused_attention(options, dropout_seed);
  };
  for (const DType dtype : kHalfDTypes) {
    check_tensor_cores_against_float32_tiles(attention({}), {randn({2, 4, 200, 64}), randn({2, 4, 260, 64}),
                                                             randn({2, 4, 260, 64})},
                                             dtype, "L 200, S 260, head dim 64");
    check_tensor_cores_against_float32_tiles(attention({.is_causal = true}),
                                             {randn({2, 300, 128}), randn({2, 300, 128}), randn({2, 300, 128})},
                                             dtype, "causal, head dim 128");
    check_tensor_cores_against_float32_tiles(attention({.dropout_p = 0.1}, seed + 3),
                                             {randn({2, 2, 100, 32}), randn({2, 2, 120, 32}), randn({2, 2, 120, 32})},
                                             dtype, "dropout, head dim 32");
  }
}

// The 16-bit kernels on NaN-poisoned outputs, against the float32 kernels' results rounded.
TEST_CASE("the kernels write every element of their bfloat16 and float16 outputs") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  for (const DType dtype : kHalfDTypes) {
    INFO("dtype " << dtype_name(dtype));
    const double tolerance = half_tolerance(dtype);
    const Tensor x = randn({6, 40}).to(dtype).to(kGPU), wide = x.to(kFloat32);
    {
      const Tensor out = poisoned({6, 40}, dtype);
      kernels::softmax[kGPU](out, x, 6, 40, 1, false);
      check_parity(out, softmax(wide, -1).to(dtype), tolerance, "softmax kernel");
      const Tensor columns = poisoned({6, 40}, dtype);
      kernels::softmax[kGPU](columns, x, 2, 3, 40, true);
      check_parity(columns, log_softmax(wide.view({2, 3, 40}), 1).view({6, 40}).to(dtype), tolerance,
                   "log_softmax kernel, inner dim");
    }
    {
      // mean and rstd of 16-bit rows are float32.
      const Tensor y = poisoned({6, 40}, dtype), mean = poisoned({6}), rstd = poisoned({6});
      kernels::layer_norm[kGPU](y, mean, rstd, x, Tensor(), Tensor(), 1e-5);
      check_parity(y, layer_norm(wide, {40}).to(dtype), tolerance, "layer_norm kernel");
      CHECK(all(isfinite(mean.cpu())).item<bool>());
      const Tensor grad_x = poisoned({6, 40}, dtype), grad_w = poisoned({40}, dtype), grad_b = poisoned({40}, dtype);
      kernels::layer_norm_backward[kGPU](grad_x, grad_w, grad_b, x, x, mean, rstd, ones({40}, dtype).to(kGPU));
      CHECK(all(isfinite(grad_x.cpu())).item<bool>());
      CHECK(all(isfinite(grad_w.cpu())).item<bool>());
      check_parity(grad_b, sum(wide, {0}).to(dtype), tolerance, "layer_norm grad_bias kernel");
    }
    {
      // The per-row values of 16-bit logits are float32.
      const Tensor targets = randint(0, 40, {6}).to(kGPU);
      const Tensor losses = poisoned({6}), row_max = poisoned({6}), log_sum = poisoned({6});
      kernels::cross_entropy[kGPU](losses, row_max, log_sum, x, targets, -100, 0.0);
      check_parity(losses, cross_entropy(wide, targets, {.reduction = Reduction::None}), kReductionTolerance,
                   "cross_entropy kernel");
      const Tensor grad = poisoned({6, 40}, dtype);
      kernels::cross_entropy_backward[kGPU](grad, ones({6}).to(kGPU), x, targets, row_max, log_sum, -100, 0.0);
      CHECK(all(isfinite(grad.cpu())).item<bool>());
    }
    {
      const Tensor ids = randint(0, 6, {9}).to(kGPU);
      const Tensor out = poisoned({9, 40}, dtype);
      kernels::embedding[kGPU](out, x, ids);
      check_parity(out, embedding(wide, ids).to(dtype), 0.0, "embedding kernel");
    }
    {
      const Tensor out = poisoned({6, 40}, dtype), expected = poisoned({6, 40});
      const PhiloxState state{seed, 5};
      kernels::dropout[kGPU](out, x, 0.5, state);
      kernels::dropout[kGPU](expected, wide, 0.5, state);
      check_parity(out, expected.to(dtype), tolerance, "dropout kernel");
    }
    {
      const Tensor b = randn({40, 9}).to(dtype).to(kGPU);
      const Tensor out = poisoned({6, 9}, dtype);
      kernels::gemm[kGPU](out, x, b, 0.0);
      check_parity(out, matmul(wide, b.to(kFloat32)).to(dtype), tolerance, "gemm kernel");
    }
    {
      const Tensor values = poisoned({6, 4}, dtype), indices = full({6, 4}, -1.0, TensorOptions(kInt64).device(kGPU));
      kernels::sort[kGPU](values, indices, x, true);
      check_parity(values, topk(x.cpu(), 4).values, 0.0, "sort kernel");
      CHECK(indices.cpu().to_vector<int64_t>() == topk(wide, 4).indices.cpu().to_vector<int64_t>());
    }
  }
}

TEST_CASE("unscale_grads on CUDA unscales and flags as the CPU does, for every dtype and a strided gradient") {
  for (const DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    INFO("dtype " << dtype_name(dtype));
    const Tensor values = mul(randn({70, 33}), 1000.0).to(dtype), other = randn({5}).to(dtype);
    for (const bool poisoned : {false, true}) {
      INFO("poisoned " << poisoned);
      Tensor cpu_grad = values.clone(), cpu_other = other.clone();
      if (poisoned) cpu_other.narrow(0, 3, 1).fill_(std::numeric_limits<double>::infinity());
      Tensor gpu_grad = cpu_grad.to(kGPU), gpu_other = cpu_other.to(kGPU);
      // The first gradient strided on both devices: the kernels unscale it through a copy.
      const std::vector<Tensor> cpu_grads = {cpu_grad.t(), cpu_other}, gpu_grads = {gpu_grad.t(), gpu_other};
      const Tensor cpu_found = zeros({}), gpu_found = zeros({}, TensorOptions(kFloat32).device(kGPU));
      kernels::unscale_grads[Device()](cpu_grads, 1.0 / 65536.0, cpu_found);
      kernels::unscale_grads[kGPU](gpu_grads, 1.0 / 65536.0, gpu_found);
      // One multiply by a power of two and one rounding each: the same bits.
      CHECK(gpu_grad.to(Device()).to(kFloat64).to_vector<double>() == cpu_grad.to(kFloat64).to_vector<double>());
      CHECK(gpu_found.item<float>() == cpu_found.item<float>());
      CHECK(cpu_found.item<float>() == (poisoned ? 1.0f : 0.0f));
    }
  }
  // More gradients than one launch takes (32), of very different sizes, one of them empty: each
  // owns its own run of blocks (cuda/common/tensor_list_blocks.h), and every element is unscaled.
  std::vector<Tensor> cpu_many, gpu_many;
  for (int i = 0; i < 40; ++i) {
    const Tensor grad = i == 7 ? randn({0, 3}) : mul(randn({i % 6 + 1, 50 + 97 * i}), 1000.0);
    cpu_many.push_back(grad.clone());
    gpu_many.push_back(grad.to(kGPU));
  }
  const Tensor cpu_found = zeros({}), gpu_found = zeros({}, TensorOptions(kFloat32).device(kGPU));
  kernels::unscale_grads[Device()](cpu_many, 1.0 / 1024.0, cpu_found);
  kernels::unscale_grads[kGPU](gpu_many, 1.0 / 1024.0, gpu_found);
  for (size_t i = 0; i < cpu_many.size(); ++i) {
    INFO("gradient " << i);
    CHECK(gpu_many[i].cpu().to_vector<float>() == cpu_many[i].to_vector<float>());
  }
  CHECK(gpu_found.item<float>() == 0.0f);
}

}  // namespace
}  // namespace ember::testing::cuda
