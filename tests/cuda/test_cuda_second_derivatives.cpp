// Second derivatives on CUDA against the CPU: for each op with a fused CUDA backward (products,
// softmax and log_softmax, layer_norm, gelu, cross_entropy, embedding, index ops, dropout, the
// fused attention) and for the composed ones around them, the gradient taken with create_graph
// and then differentiated again must be the CPU's. The first backward runs the fused CUDA
// kernels' own second-derivative paths (core/ops: a composite under create_graph, or a backward
// op with a backward of its own); the second backward runs whatever those recorded on the GPU.
//
// For inputs x, a random u weighting the output and a random v weighting the gradient:
//   g = d<f(x), u>/dx   (create_graph)      h = d<g, v>/dx   (a Hessian-vector product)
// Both g and h are compared, on the CPU and on the GPU from the same values.
#include "helpers.h"
#include "op_parity.h"

namespace ember::testing::cuda {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// g and h of `fn` at `inputs` (CPU tensors), on `device`; the floating inputs are differentiated.
std::pair<std::vector<Tensor>, std::vector<Tensor>> second_order(const Fn& fn, const std::vector<Tensor>& inputs,
                                                                 const Tensor& u, const std::vector<Tensor>& v,
                                                                 Device device) {
  std::vector<Tensor> xs, differentiated;
  for (const Tensor& input : inputs) {
    Tensor x = input.detach().to(device);
    if (is_floating_point(x.dtype())) {
      x.requires_grad_(true);
      differentiated.push_back(x);
    }
    xs.push_back(x);
  }
  const Tensor y = fn(xs);
  const Tensor weighted = sum(mul(y, u.to(device)));
  std::vector<Tensor> g = autograd::grad({weighted}, differentiated, {}, {.create_graph = true});
  Tensor g_dot_v = zeros({}, TensorOptions(y.dtype()).device(device));
  for (size_t i = 0; i < g.size(); ++i) g_dot_v = add(g_dot_v, sum(mul(g[i], v[i].to(device))));
  std::vector<Tensor> h = autograd::grad({g_dot_v}, differentiated, {}, {.allow_unused = true});
  for (size_t i = 0; i < h.size(); ++i) {
    if (!h[i].defined()) h[i] = zeros_like(differentiated[i]);  // a linear op: no second derivative
  }
  return {g, h};
}

void check_second_order(const std::string& what, const std::vector<Tensor>& inputs, const Fn& fn, double tolerance) {
  CAPTURE(what);
  std::vector<Tensor> v;
  for (const Tensor& input : inputs) {
    if (is_floating_point(input.dtype())) v.push_back(randn(input.sizes(), input.dtype()));
  }
  // u: the output's shape, found from a CPU run.
  std::vector<Tensor> plain;
  for (const Tensor& input : inputs) plain.push_back(input.detach());
  const Tensor u = randn(fn(plain).sizes(), kFloat64);
  const auto [g_cpu, h_cpu] = second_order(fn, inputs, u, v, kCPU);
  const auto [g_gpu, h_gpu] = second_order(fn, inputs, u, v, kGPU);
  for (size_t i = 0; i < g_cpu.size(); ++i) {
    check_parity(g_gpu[i], g_cpu[i], tolerance, what + ": first derivative of input " + std::to_string(i));
    check_parity(h_gpu[i], h_cpu[i], tolerance, what + ": second derivative of input " + std::to_string(i));
  }
}

Tensor f64(const Shape& shape) { return randn(shape, kFloat64); }

TEST_CASE("second derivatives of the fused ops match the CPU in float64") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  constexpr double kTight = 1e-10;
  check_second_order("matmul with a broadcast batch", {f64({2, 1, 5, 7}), f64({3, 7, 4})},
                     [](const auto& in) { return matmul(in[0], in[1]); }, kTight);
  check_second_order("linear", {f64({6, 8}), f64({5, 8}), f64({5})},
                     [](const auto& in) { return linear(in[0], in[1], in[2]); }, kTight);
  check_second_order("softmax", {f64({4, 9})}, [](const auto& in) { return softmax(in[0], -1); }, kTight);
  check_second_order("log_softmax over an inner dim", {f64({3, 6, 5})},
                     [](const auto& in) { return log_softmax(in[0], 1); }, kTight);
  check_second_order("layer_norm with weight and bias", {f64({4, 10}), f64({10}), f64({10})},
                     [](const auto& in) { return layer_norm(in[0], {10}, in[1], in[2], 1e-5); }, kTight);
  check_second_order("gelu", {f64({5, 7})}, [](const auto& in) { return gelu(in[0]); }, kTight);
  check_second_order("gelu, tanh form", {f64({5, 7})},
                     [](const auto& in) { return gelu(in[0], GeluApproximation::Tanh); }, kTight);
  check_second_order("relu of a product", {f64({5, 7})}, [](const auto& in) { return relu(mul(in[0], in[0])); }, kTight);
  const Tensor targets = tensor<int64_t>({0, 3, 2, -100, 1}, {5});
  check_second_order("cross_entropy with ignore_index and label smoothing", {f64({5, 4}), targets},
                     [](const auto& in) {
                       return cross_entropy(in[0], in[1], {.ignore_index = -100, .label_smoothing = 0.1});
                     },
                     kTight);
  const Tensor ids = tensor<int64_t>({1, 0, 3, 3, 2, 1}, {2, 3});
  check_second_order("embedding, then a square", {f64({4, 5}), ids},
                     [](const auto& in) { return pow(embedding(in[0], in[1]), 2.0); }, kTight);
  const Tensor index = tensor<int64_t>({2, 0, 2}, {3});
  check_second_order("index_select, then a square", {f64({4, 6})},
                     [index](const auto& in) { return pow(index_select(in[0], 0, index.to(in[0].device())), 2.0); },
                     kTight);
  check_second_order("dropout of a square (the same mask on both devices)", {f64({6, 8})},
                     [](const auto& in) {
                       manual_seed(11);
                       return dropout(mul(in[0], in[0]), 0.3);
                     },
                     kTight);
  check_second_order("sum and mean of a product", {f64({3, 4}), f64({4})},
                     [](const auto& in) { return mean(mul(sum(in[0], {0}), in[1])); }, kTight);
}

TEST_CASE("second derivatives of the fused attention match the CPU in float64: masks and dropout") {
  const uint64_t seed = seed_fresh();
  INFO("seed " << seed);
  const std::vector<Tensor> qkv{f64({2, 2, 9, 8}), f64({2, 2, 11, 8}), f64({2, 2, 11, 8})};
  check_second_order("attention", qkv,
                     [](const auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }, 1e-9);
  const Tensor padding = logical_not(
      logical_and(eq(arange(2.0).view({2, 1, 1, 1}), 1.0), ge(arange(11.0).view({1, 1, 1, 11}), 7.0)));
  check_second_order("attention with a padding mask", qkv,
                     [padding](const auto& in) {
                       return scaled_dot_product_attention(in[0], in[1], in[2],
                                                           {.attn_mask = padding.to(in[0].device())});
                     },
                     1e-9);
  check_second_order("causal attention with dropout", {f64({2, 9, 8}), f64({2, 9, 8}), f64({2, 9, 8})},
                     [](const auto& in) {
                       manual_seed(5);
                       return scaled_dot_product_attention(in[0], in[1], in[2], {.dropout_p = 0.2, .is_causal = true});
                     },
                     1e-9);
}

}  // namespace
}  // namespace ember::testing::cuda
