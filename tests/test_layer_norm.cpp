// layer_norm: values against a naive loop, gradients against the same formula composed of
// elementary ops, gradcheck with and without weight and bias, errors.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Naive: each row of the last `n` elements normalised in double, then scaled and shifted.
Tensor reference_layer_norm(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias, double eps) {
  const std::vector<double> values = x.to_vector<double>();
  const std::vector<double> w = weight.defined() ? weight.to_vector<double>() : std::vector<double>(n, 1.0);
  const std::vector<double> b = bias.defined() ? bias.to_vector<double>() : std::vector<double>(n, 0.0);
  std::vector<double> out(values.size());
  for (size_t start = 0; start < values.size(); start += n) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += values[start + i] / static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) var += (values[start + i] - mean) * (values[start + i] - mean) / n;
    for (int64_t i = 0; i < n; ++i) out[start + i] = (values[start + i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
  }
  return tensor(out, x.sizes(), kFloat64);
}

// The same formula built from elementary differentiable ops, for comparing gradients.
Tensor composed_layer_norm(const Tensor& x, const Shape& dims, const Tensor& weight, const Tensor& bias, double eps) {
  const Tensor centered = sub(x, mean(x, dims, true));
  const Tensor variance = mean(mul(centered, centered), dims, true);
  Tensor y = div(centered, sqrt(add(variance, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

}  // namespace

TEST_CASE("layer_norm matches a naive loop, with and without weight and bias") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = dtype == kFloat32 ? 1e-5 : 1e-12;
    const Tensor x = add(mul(randn({3, 4, 5}, dtype), 2.0), 7.0);  // a large mean
    const Tensor w = randn({5}, dtype), b = randn({5}, dtype);
    check_close(layer_norm(x, {5}, w, b), reference_layer_norm(x, 5, w, b, 1e-5), tolerance, 1e-5);
    check_close(layer_norm(x, {5}), reference_layer_norm(x, 5, Tensor(), Tensor(), 1e-5), tolerance, 1e-5);
    check_close(layer_norm(x, {5}, w), reference_layer_norm(x, 5, w, Tensor(), 1e-5), tolerance, 1e-5);
    check_close(layer_norm(x, {5}, Tensor(), b), reference_layer_norm(x, 5, Tensor(), b, 1e-5), tolerance, 1e-5);
    const Tensor w2 = randn({4, 5}, dtype), b2 = randn({4, 5}, dtype);
    check_close(layer_norm(x, {4, 5}, w2, b2, 1e-3), reference_layer_norm(x, 20, w2, b2, 1e-3), tolerance, 1e-5);
    // A strided input.
    const Tensor xt = x.transpose(0, 2);  // [5, 4, 3]
    const Tensor w3 = randn({3}, dtype);
    check_close(layer_norm(xt, {3}, w3), reference_layer_norm(xt.contiguous(), 3, w3, Tensor(), 1e-5), tolerance,
                1e-5);
  }
}

TEST_CASE("layer_norm of a constant row is 0 (plus bias), not NaN") {
  const Tensor x = full({2, 4}, 3.0, kFloat64);
  const Tensor b = tensor({1.0, 2.0, 3.0, 4.0}, {4}, kFloat64);
  check_close(layer_norm(x, {4}, Tensor(), b), tensor({1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0}, {2, 4}, kFloat64));
}

TEST_CASE("layer_norm passes gradcheck with and without weight and bias, multi-dim normalized_shape") {
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, in[1], in[2]); },
                  (std::vector<Tensor>{leaf({3, 4}), leaf({4}), leaf({4})}));
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}); },
                  std::vector<Tensor>{leaf({3, 4})});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, in[1]); },
                  (std::vector<Tensor>{leaf({2, 4}), leaf({4})}));
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, Tensor(), in[1]); },
                  (std::vector<Tensor>{leaf({2, 4}), leaf({4})}));
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], {2, 3}, in[1], in[2], 1e-3); },
                  (std::vector<Tensor>{leaf({2, 2, 3}), leaf({2, 3}), leaf({2, 3})}));
  // Strided input, and parameters that need no gradient.
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0].t(), {3}, in[1], in[2]); },
                  (std::vector<Tensor>{leaf({3, 4}), randn({3}, kFloat64), leaf({3})}));
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return layer_norm(in[0], {3}, in[1]); },
                  (std::vector<Tensor>{as_leaf(randn({3, 2}, kFloat64).t()), leaf({3})}));
}

TEST_CASE("layer_norm gradients over many rows (split across threads) match the composed formula") {
  for (DType dtype : {kFloat64, kFloat32}) {
    const double tolerance = dtype == kFloat32 ? 1e-4 : 1e-10;
    const Tensor x0 = randn({64, 3, 200}, dtype);
    const Tensor w0 = randn({200}, dtype), b0 = randn({200}, dtype);
    const Tensor upstream = randn({64, 3, 200}, dtype);
    const Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    sum(mul(layer_norm(x, {200}, w, b), upstream)).backward();
    const Tensor xr = x0.clone().requires_grad_(), wr = w0.clone().requires_grad_(),
                 br = b0.clone().requires_grad_();
    sum(mul(composed_layer_norm(xr, {-1}, wr, br, 1e-5), upstream)).backward();
    check_close(x.grad(), xr.grad(), tolerance, 1e-4);
    check_close(w.grad(), wr.grad(), 10 * tolerance, 1e-4);
    check_close(b.grad(), br.grad(), 10 * tolerance, 1e-4);
  }
}

TEST_CASE("layer_norm errors name the shapes") {
  const Tensor x = randn({2, 3, 4});
  CHECK_THROWS_WITH_ALL(layer_norm(x, {3}), "layer_norm", "normalized_shape [3]", "[2, 3, 4]");
  CHECK_THROWS_WITH_ALL(layer_norm(x, {2, 3, 4, 5}), "normalized_shape [2, 3, 4, 5]", "[2, 3, 4]");
  CHECK_THROWS_WITH_ALL(layer_norm(x, {}), "layer_norm", "at least one dim");
  CHECK_THROWS_WITH_ALL(layer_norm(x, {4}, randn({3})), "layer_norm", "weight of shape [3]", "normalized_shape [4]");
  CHECK_THROWS_WITH_ALL(layer_norm(x, {3, 4}, randn({3, 4}), randn({4})), "bias of shape [4]",
                        "normalized_shape [3, 4]");
  CHECK_THROWS_WITH_ALL(layer_norm(x, {4}, randn({4}, kFloat64)), "weight", "float64", "float32");
  CHECK_THROWS_WITH_ALL(layer_norm(ones({2, 4}, kInt64), {4}), "layer_norm", "int64");
}
