// Gradients of gradients: backward(create_graph) and autograd::grad, gradcheck and
// gradgradcheck on every differentiable op and on whole layers, and the errors of ops or
// backwards that cannot be differentiated again.
#include <algorithm>
#include <iostream>

#include "helpers.h"
#include "nn/modules/attention.h"
#include "nn/modules/layer_norm.h"
#include "nn/modules/linear.h"
#include "nn/models/transformer_layers.h"

using namespace ember;
using namespace ember::testing;

namespace {

using Inputs = std::vector<Tensor>;

// The cases checked so far, printed by the last test of the suite.
std::vector<std::string>& checked_cases() {
  static std::vector<std::string> cases;
  return cases;
}

// gradcheck and gradgradcheck of fn at inputs, both reported on failure.
void check_both_orders(const std::string& name, const GradcheckFunction& fn, const Inputs& inputs,
                       const GradcheckOptions& options = {}) {
  INFO("case: " << name);
  const GradcheckReport first = gradcheck(fn, inputs, options);
  CHECK_MESSAGE(first.passed, first.summary());
  const GradcheckReport second = gradgradcheck(fn, inputs, Tensor(), options);
  CHECK_MESSAGE(second.passed, second.summary());
  checked_cases().push_back(name);
}

Tensor positive_leaf(const Shape& shape) { return as_leaf(add(abs(randn(shape, kFloat64)), 0.5)); }

// Values kept at least `gap` apart and away from zero, so that max, sort, relu and abs are
// differentiable there and finite differences do not cross a kink.
Tensor spread_leaf(const Shape& shape, double gap = 0.3) {
  const int64_t n = numel_of(shape);
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = (i - n / 2 + 0.5) * gap;
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = (i * 7 + 3) % n;  // a fixed shuffle (n coprime to 7)
  std::vector<double> shuffled(n);
  for (int64_t i = 0; i < n; ++i) shuffled[i] = values[order[i]];
  return as_leaf(tensor(shuffled, shape, TensorOptions(kFloat64)));
}

}  // namespace

// --- the API ------------------------------------------------------------------------------

TEST_CASE("autograd::grad with create_graph differentiates to any order") {
  const Tensor x = as_leaf(tensor({0.5, -1.0, 2.0}, {3}, TensorOptions(kFloat64)));
  const Tensor y = sum(mul(x, mul(x, x)));
  const Tensor dy = autograd::grad({y}, {x}, {}, {.create_graph = true})[0];
  check_close(dy, tensor({0.75, 3.0, 12.0}, {3}, TensorOptions(kFloat64)), 1e-12, 0);
  CHECK(dy.requires_grad());
  const Tensor d2y = autograd::grad({sum(dy)}, {x}, {}, {.create_graph = true})[0];
  check_close(d2y, tensor({3.0, -6.0, 12.0}, {3}, TensorOptions(kFloat64)), 1e-12, 0);
  const Tensor d3y = autograd::grad({sum(d2y)}, {x})[0];
  check_close(d3y, tensor({6.0, 6.0, 6.0}, {3}, TensorOptions(kFloat64)), 1e-12, 0);
  CHECK_FALSE(d3y.requires_grad());
  CHECK_FALSE(x.grad().defined());  // grad() leaves .grad alone
}

TEST_CASE("backward(create_graph) leaves a differentiable .grad, and gradients add up") {
  const Tensor x = as_leaf(tensor({1.0, 2.0}, {2}, TensorOptions(kFloat64)));
  sum(mul(x, mul(x, x))).backward({.create_graph = true});
  REQUIRE(x.grad().defined());
  CHECK(x.grad().requires_grad());
  check_close(x.grad().detach(), tensor({3.0, 12.0}, {2}, TensorOptions(kFloat64)), 1e-12, 0);
  // A gradient penalty: d/dx sum(3x^2) = 6x adds into the same .grad.
  const Tensor penalty = sum(x.grad());
  penalty.backward();
  check_close(x.grad().detach(), tensor({3.0 + 6.0, 12.0 + 12.0}, {2}, TensorOptions(kFloat64)), 1e-12, 0);
}

TEST_CASE("autograd::grad: unused inputs, non-leaf inputs, several outputs, retain_graph's default") {
  const Tensor x = as_leaf(tensor({1.0, 2.0}, {2}, TensorOptions(kFloat64)));
  const Tensor unused = leaf({3});
  const Tensor h = mul(x, 3.0);
  const Tensor y = sum(mul(h, h));
  CHECK_THROWS_WITH_ALL(autograd::grad({y}, {x, unused}, {}, {.retain_graph = true}), "grad: input 1",
                        "shape [3]", "not used", "allow_unused");
  const std::vector<Tensor> gradients = autograd::grad({y}, {h, unused, x}, {}, {.retain_graph = true,
                                                                               .allow_unused = true});
  check_close(gradients[0], tensor({6.0, 12.0}, {2}, TensorOptions(kFloat64)), 1e-12, 0);  // 2h
  CHECK_FALSE(gradients[1].defined());
  check_close(gradients[2], tensor({18.0, 36.0}, {2}, TensorOptions(kFloat64)), 1e-12, 0);  // 18x

  // Two outputs with their own weights; y2 depends on y1.
  const Tensor y1 = mul(x, x);
  const Tensor y2 = sum(y1);
  const Tensor g = autograd::grad({y1, y2}, {x}, {tensor({1.0, -1.0}, {2}, TensorOptions(kFloat64)),
                                                   tensor({2.0}, {}, TensorOptions(kFloat64)).reshape({})})[0];
  check_close(g, tensor({2.0 * 1 * 3, 2.0 * 2 * 1}, {2}, TensorOptions(kFloat64)), 1e-12, 0);

  // retain_graph defaults to create_graph.
  const Tensor z = sum(exp(x));
  autograd::grad({z}, {x});
  CHECK_THROWS_WITH_ALL(autograd::grad({z}, {x}), "second time");
  const Tensor w = sum(exp(x));
  autograd::grad({w}, {x}, {}, {.create_graph = true});
  CHECK_NOTHROW(autograd::grad({w}, {x}));

  CHECK_THROWS_WITH_ALL(autograd::grad({sum(x.detach())}, {x}), "grad: output 0", "does not require grad");
  CHECK_THROWS_WITH_ALL(autograd::grad({y}, {x.detach()}), "grad: input 0", "does not require grad");
  CHECK_THROWS_WITH_ALL(autograd::grad({y}, {}), "grad: no inputs given");
  CHECK_THROWS_WITH_ALL(autograd::grad({h}, {x}), "grad", "one-element outputs", "[2]");
}

TEST_CASE("autograd::grad of an output that is itself the input, and of an output given twice") {
  const Tensor x = as_leaf(tensor({1.0, 2.0}, {2}, TensorOptions(kFloat64)));
  const Tensor weights = tensor({3.0, -1.0}, {2}, TensorOptions(kFloat64));
  check_close(autograd::grad({x}, {x}, {weights})[0], weights, 1e-12, 0);
  const Tensor y = mul(x, x);  // twice the same output: the weights add, its node runs once
  check_close(autograd::grad({y, y}, {x}, {weights, weights})[0],
              tensor({12.0, -8.0}, {2}, TensorOptions(kFloat64)), 1e-12, 0);
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("create_graph keeps hooks, anomaly mode and the in-place version checks working") {
  for (bool create_graph : {false, true}) {
    CAPTURE(create_graph);
    // Post-accumulate-grad hooks run in backward, not in grad().
    const Tensor x = as_leaf(tensor({1.0, 2.0}, {2}, TensorOptions(kFloat64)));
    int calls = 0;
    const autograd::HookId id = autograd::register_post_accumulate_grad_hook(x, [&](const Tensor&) { ++calls; });
    sum(mul(x, x)).backward({.create_graph = create_graph});
    CHECK(calls == 1);
    autograd::grad({sum(mul(x, x))}, {x}, {}, {.create_graph = create_graph});
    CHECK(calls == 1);
    autograd::remove_post_accumulate_grad_hook(id);

    // Anomaly mode names the backward that made an inf: d sqrt(x)/dx at 0.
    {
      DetectAnomalyGuard anomaly;
      const Tensor zero = as_leaf(tensor({0.0, 1.0}, {2}, TensorOptions(kFloat64)));
      CHECK_THROWS_WITH_ALL(autograd::grad({sum(sqrt(zero))}, {zero}, {}, {.create_graph = create_graph}),
                            "SqrtBackward", "NaN or inf");
    }

    // A saved tensor modified in place is refused in both modes.
    const Tensor y = exp(x);
    Tensor modified = y;
    modified.mul_(2.0);
    CHECK_THROWS_WITH_ALL(autograd::grad({sum(y)}, {x}, {}, {.create_graph = create_graph}),
                          "modified by an in-place operation");
  }
}

TEST_CASE("create_graph under autocast: the backward keeps the forward's dtypes, and differentiates again") {
  manual_seed(21);
  const Tensor x = as_leaf(randn({4, 8}));
  const Tensor w = as_leaf(randn({3, 8}));
  Tensor y;
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    y = sum(mul(linear(x, w), linear(x, w)));  // the products run in bfloat16, the sum in float32
  }
  const Tensor dx = autograd::grad({y}, {x}, {}, {.create_graph = true})[0];
  CHECK(dx.dtype() == kFloat32);
  CHECK(dx.requires_grad());
  // d/dw of sum(dx): y = |x W^T|^2, so dx = 2 x W^T W and its gradient in w is nonzero.
  const Tensor dw = autograd::grad({sum(dx)}, {w})[0];
  CHECK(dw.dtype() == kFloat32);
  CHECK(max_abs(dw) > 0.0);
}

namespace {

// x^3 with a backward that is right to first order but treats x as a constant: its second
// derivative is wrong (zero), which gradgradcheck must catch and gradcheck cannot.
struct CubeWithConstantBackward {
  static constexpr const char* name = "cube_with_constant_backward";
  static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
    ctx.save_for_backward({inputs[0]});
    return mul(inputs[0], mul(inputs[0], inputs[0]));
  }
  static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad) {
    const Tensor x = ctx.saved_tensors()[0].detach();
    return {mul(grad, mul(mul(x, x), 3.0))};
  }
};

// The same cube, with its backward computed where nothing records (as a fused kernel would).
struct CubeWithoutHistory {
  static constexpr const char* name = "cube_without_history";
  static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
    ctx.save_for_backward({inputs[0]});
    return mul(inputs[0], mul(inputs[0], inputs[0]));
  }
  static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad) {
    NoGradGuard no_grad;
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(grad, mul(mul(x, x), 3.0))};
  }
};

// The right one: its backward is written with ops on the saved tensor, so it records.
struct Cube {
  static constexpr const char* name = "cube";
  static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
    ctx.save_for_backward({inputs[0]});
    return mul(inputs[0], mul(inputs[0], inputs[0]));
  }
  static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad) {
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(grad, mul(mul(x, x), 3.0))};
  }
};

}  // namespace

namespace {

// An op whose backward must never run: autograd::grad has to leave its branch alone when the
// inputs asked about do not depend on it.
struct NeverBackward {
  static constexpr const char* name = "never";
  static Tensor forward(autograd::Context&, const std::vector<Tensor>& inputs) { return mul(inputs[0], 1.0); }
  static std::vector<Tensor> backward(autograd::Context&, const Tensor&) { fail("this backward must not run"); }
};

}  // namespace

TEST_CASE("autograd::grad runs only the part of the graph that leads to its inputs") {
  const Tensor x = as_leaf(tensor({1.0, -2.0}, {2}, TensorOptions(kFloat64)));
  const Tensor w = leaf({3});
  const Tensor y = add(sum(mul(x, x)), sum(autograd::apply<NeverBackward>({w})));
  check_close(autograd::grad({y}, {x}, {}, {.retain_graph = true})[0],
              tensor({2.0, -4.0}, {2}, TensorOptions(kFloat64)), 1e-12, 0);
  CHECK_THROWS_WITH_ALL(autograd::grad({y}, {w}), "NeverBackward", "must not run");
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("gradgradcheck catches a wrong double backward that gradcheck passes") {
  const Tensor x = leaf({4});
  auto wrong = [](const Inputs& in) { return autograd::apply<CubeWithConstantBackward>({in[0]}); };
  CHECK(gradcheck(wrong, {x}).passed);
  const GradcheckReport report = gradgradcheck(wrong, {x});
  CHECK_FALSE(report.passed);
  const std::string summary = report.summary();
  CHECK(summary.find("gradgradcheck FAILED") != std::string::npos);
  CHECK(summary.find("input 0: FAILED") != std::string::npos);
  CHECK(summary.find("of the gradient of input 0") != std::string::npos);
  MESSAGE("a wrong double backward, as gradgradcheck reports it:\n" << summary);

  check_both_orders("custom function (autograd::apply)", [](const Inputs& in) { return autograd::apply<Cube>({in[0]}); },
                    {x});
}

TEST_CASE("a backward that records nothing throws under create_graph, naming its op") {
  const Tensor x = leaf({3});
  // First order it is fine.
  const Tensor y = autograd::apply<CubeWithoutHistory>({x});
  CHECK_NOTHROW(autograd::grad({sum(mul(y, y))}, {x}));
  // Under create_graph the gradient reaching it has a history and what it returns has none.
  const Tensor z = autograd::apply<CubeWithoutHistory>({x});
  CHECK_THROWS_WITH_ALL(autograd::grad({sum(mul(z, z))}, {x}, {}, {.create_graph = true}),
                        "CubeWithoutHistoryBackward", "not differentiable");
}

TEST_CASE("gradgradcheck: errors name what is wrong") {
  const Tensor x = leaf({2});
  CHECK_THROWS_WITH_ALL(gradgradcheck([](const Inputs& in) { return in[0]; }, {x.detach()}), "gradgradcheck",
                        "no input requires grad");
  CHECK_THROWS_WITH_ALL(
      gradgradcheck([](const Inputs& in) { return mul(in[0], in[0]); }, {x}, zeros({3}, kFloat64)),
      "gradgradcheck", "[2]", "[3]");
  CHECK_THROWS_WITH_ALL(
      gradgradcheck([](const Inputs& in) { return mul(in[0], in[0]); }, {x}, zeros({2}, kFloat32)),
      "gradgradcheck", "float64");
}

// --- every differentiable op, first and second order ------------------------------------------

TEST_CASE("elementwise ops, broadcast, non-contiguous and empty") {
  manual_seed(11);
  const Tensor a = leaf({2, 3}), b_row = leaf({3}), b_col = leaf({2, 1});
  const Tensor transposed = as_leaf(randn({3, 2}, kFloat64).t());
  check_both_orders("add (broadcast)", [](const Inputs& in) { return add(in[0], in[1]); }, {a, b_row});
  check_both_orders("sub (broadcast)", [](const Inputs& in) { return sub(in[0], in[1]); }, {a, b_col});
  check_both_orders("mul (broadcast, non-contiguous)", [](const Inputs& in) { return mul(in[0], in[1]); },
                    {transposed, b_row});
  check_both_orders("mul (same tensor twice)", [](const Inputs& in) { return mul(in[0], in[0]); }, {a});
  check_both_orders("div (broadcast)", [](const Inputs& in) { return div(in[0], in[1]); },
                    {a, positive_leaf({2, 1})});
  check_both_orders("pow (tensor exponent)", [](const Inputs& in) { return pow(in[0], in[1]); },
                    {positive_leaf({2, 3}), leaf({3})});
  check_both_orders("pow (scalar exponent)", [](const Inputs& in) { return pow(in[0], 3.0); }, {a});
  const Tensor spread = spread_leaf({2, 3});
  check_both_orders("maximum", [](const Inputs& in) { return maximum(in[0], in[1]); },
                    {spread, as_leaf(mul(spread.detach(), -0.7))});
  check_both_orders("minimum", [](const Inputs& in) { return minimum(in[0], in[1]); },
                    {spread, as_leaf(mul(spread.detach(), -0.7))});
  check_both_orders("mul (empty)", [](const Inputs& in) { return mul(in[0], in[1]); }, {leaf({0, 3}), leaf({3})});
  check_both_orders("add_ and mul_ (in place, on a clone)",
                    [](const Inputs& in) {
                      Tensor y = clone(in[0]);
                      y.add_(in[1], 0.5);
                      y.mul_(in[1]);
                      return y;
                    },
                    {a, leaf({2, 3})});
}

TEST_CASE("unary ops and activations") {
  manual_seed(12);
  const Tensor x = leaf({2, 3}), positive = positive_leaf({2, 3}), spread = spread_leaf({2, 3});
  const std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>> smooth = {
      {"neg", neg}, {"exp", exp}, {"sin", sin}, {"cos", cos}, {"tanh", tanh}, {"sigmoid", sigmoid}, {"erf", erf}};
  for (const auto& [name, op] : smooth) {
    check_both_orders(name, [op](const Inputs& in) { return op(in[0]); }, {x});
  }
  check_both_orders("log", [](const Inputs& in) { return log(in[0]); }, {positive});
  check_both_orders("sqrt", [](const Inputs& in) { return sqrt(in[0]); }, {positive});
  check_both_orders("rsqrt", [](const Inputs& in) { return rsqrt(in[0]); }, {positive});
  check_both_orders("abs", [](const Inputs& in) { return abs(in[0]); }, {spread});
  check_both_orders("relu (fused backward)", [](const Inputs& in) { return relu(in[0]); }, {spread});
  check_both_orders("gelu (fused backward)", [](const Inputs& in) { return gelu(in[0]); }, {x});
  check_both_orders("gelu tanh (fused backward)",
                    [](const Inputs& in) { return gelu(in[0], GeluApproximation::Tanh); }, {x});
  check_both_orders("clamp", [](const Inputs& in) { return clamp(in[0], -0.5, 0.4); }, {spread});
  check_both_orders("exp (non-contiguous)", [](const Inputs& in) { return exp(in[0]); },
                    {as_leaf(randn({3, 2}, kFloat64).t())});
}

TEST_CASE("reductions") {
  manual_seed(13);
  const Tensor x = leaf({3, 4}), spread = spread_leaf({3, 4});
  check_both_orders("sum (dims)", [](const Inputs& in) { return sum(in[0], {1}); }, {x});
  check_both_orders("sum (all)", [](const Inputs& in) { return sum(in[0]); }, {x});
  check_both_orders("mean", [](const Inputs& in) { return mean(in[0], {0}, true); }, {x});
  check_both_orders("var", [](const Inputs& in) { return var(in[0], Shape{1}); }, {x});
  check_both_orders("std", [](const Inputs& in) { return ember::std(in[0], Shape{0}); }, {x});
  check_both_orders("logsumexp", [](const Inputs& in) { return logsumexp(in[0], {1}); }, {x});
  check_both_orders("amax", [](const Inputs& in) { return amax(in[0], {1}); }, {spread});
  check_both_orders("amin", [](const Inputs& in) { return amin(in[0], {0}); }, {spread});
  check_both_orders("max (dim)", [](const Inputs& in) { return max(in[0], 1).values; }, {spread});
  check_both_orders("min (all)", [](const Inputs& in) { return min(in[0]); }, {spread});
  check_both_orders("sum (non-contiguous)", [](const Inputs& in) { return sum(mul(in[0], in[0]), {0}); },
                    {as_leaf(randn({4, 3}, kFloat64).t())});
  check_both_orders("sum (empty)", [](const Inputs& in) { return sum(mul(in[0], in[0]), {0}); }, {leaf({0, 3})});
}

TEST_CASE("softmax, log_softmax, layer_norm, cross_entropy (fused backwards)") {
  manual_seed(14);
  const Tensor x = leaf({2, 3, 4});
  check_both_orders("softmax (last dim)", [](const Inputs& in) { return softmax(in[0], -1); }, {x});
  check_both_orders("softmax (middle dim, non-contiguous)", [](const Inputs& in) { return softmax(in[0], 1); },
                    {as_leaf(randn({2, 4, 3}, kFloat64).transpose(1, 2))});
  check_both_orders("log_softmax", [](const Inputs& in) { return log_softmax(in[0], 0); }, {x});
  check_both_orders("softmax (empty)", [](const Inputs& in) { return softmax(in[0], -1); }, {leaf({0, 4})});
  check_both_orders("layer_norm (weight, bias)",
                    [](const Inputs& in) { return layer_norm(in[0], {4}, in[1], in[2]); },
                    {x, leaf({4}), leaf({4})});
  check_both_orders("layer_norm (two normalized dims, no bias, non-contiguous)",
                    [](const Inputs& in) { return layer_norm(in[0], {3, 2}, in[1]); },
                    {as_leaf(randn({2, 3, 4}, kFloat64).permute({2, 1, 0})), leaf({3, 2})});
  const Tensor targets = tensor<int64_t>({1, 3, -100, 0, 2, 3}, {2, 3});
  for (const Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    check_both_orders(
        "cross_entropy (ignore_index, label smoothing, reduction " + std::to_string(static_cast<int>(reduction)) + ")",
        [&](const Inputs& in) {
          return cross_entropy(in[0], targets, {.label_smoothing = 0.1, .reduction = reduction});
        },
        {x});
  }
}

TEST_CASE("products: matmul, bmm, linear, einsum") {
  manual_seed(15);
  check_both_orders("matmul (matrices)", [](const Inputs& in) { return matmul(in[0], in[1]); },
                    {leaf({2, 3}), leaf({3, 4})});
  check_both_orders("matmul (vector, matrix)", [](const Inputs& in) { return matmul(in[0], in[1]); },
                    {leaf({3}), leaf({3, 2})});
  check_both_orders("matmul (batch broadcast, non-contiguous)", [](const Inputs& in) { return matmul(in[0], in[1]); },
                    {leaf({2, 2, 3}), as_leaf(randn({4, 3}, kFloat64).t())});
  check_both_orders("bmm", [](const Inputs& in) { return bmm(in[0], in[1]); }, {leaf({2, 2, 3}), leaf({2, 3, 2})});
  check_both_orders("linear", [](const Inputs& in) { return linear(in[0], in[1], in[2]); },
                    {leaf({2, 3, 4}), leaf({2, 4}), leaf({2})});
  check_both_orders("einsum", [](const Inputs& in) { return einsum("bij,bjk->bik", {in[0], in[1]}); },
                    {leaf({2, 2, 3}), leaf({2, 3, 2})});
  check_both_orders("matmul (empty inner dim)", [](const Inputs& in) { return matmul(in[0], in[1]); },
                    {leaf({2, 0}), leaf({0, 3})});
}

TEST_CASE("views, joins, indexing and sorting") {
  manual_seed(16);
  const Tensor x = leaf({2, 3, 4});
  check_both_orders("reshape, transpose, permute", [](const Inputs& in) {
    return mul(reshape(transpose(permute(in[0], {2, 0, 1}), 0, 1), {6, 4}), in[0].reshape({6, 4}));
  }, {x});
  check_both_orders("expand", [](const Inputs& in) { return mul(expand(in[0], {3, 2, 4}), in[0]); }, {leaf({2, 4})});
  check_both_orders("slice (step), narrow, select", [](const Inputs& in) {
    return mul(slice(in[0], 2, 0, 4, 2), add(narrow(in[0], 2, 1, 2), unsqueeze(select(in[0], 2, 3), 2)));
  }, {x});
  check_both_orders("squeeze, unsqueeze", [](const Inputs& in) { return mul(squeeze(unsqueeze(in[0], 0)), in[0]); },
                    {x});
  check_both_orders("cat", [](const Inputs& in) { return mul(cat({in[0], in[1]}, 1), cat({in[1], in[0]}, 1)); },
                    {leaf({2, 2}), leaf({2, 3})});
  check_both_orders("stack", [](const Inputs& in) { return mul(stack({in[0], in[1]}, 0), in[0]); },
                    {leaf({2, 3}), leaf({2, 3})});
  const Tensor index = tensor<int64_t>({2, 0, 2}, {3});
  check_both_orders("index_select (repeated index)", [&](const Inputs& in) {
    const Tensor picked = index_select(in[0], 1, index);
    return mul(picked, picked);
  }, {x});
  const Tensor gather_index = tensor<int64_t>({0, 0, 1, 1, 0, 1}, {2, 3, 1});
  check_both_orders("gather", [&](const Inputs& in) {
    const Tensor picked = gather(in[0], 1, gather_index);
    return mul(picked, picked);
  }, {leaf({2, 2, 1})});
  const Tensor condition = gt(randn({2, 3}, kFloat64), 0.0);
  check_both_orders("where (masked)", [&](const Inputs& in) { return mul(where(condition, in[0], in[1]), in[0]); },
                    {leaf({2, 3}), leaf({3})});
  check_both_orders("masked_fill", [&](const Inputs& in) {
    const Tensor filled = masked_fill(in[0], condition, 0.25);
    return mul(filled, filled);
  }, {leaf({2, 3})});
  check_both_orders("tril, triu", [](const Inputs& in) { return mul(tril(in[0]), triu(in[0], -1)); }, {leaf({3, 3})});
  check_both_orders("sort", [](const Inputs& in) {
    const Tensor sorted = sort(in[0], 1).values;
    return mul(sorted, sorted);
  }, {spread_leaf({2, 4})});
  check_both_orders("topk", [](const Inputs& in) {
    const Tensor top = topk(in[0], 2, 0).values;
    return mul(top, top);
  }, {spread_leaf({3, 2})});
}

TEST_CASE("embedding, dropout and attention (fused kernels)") {
  manual_seed(17);
  const Tensor ids = tensor<int64_t>({1, 0, 3, 1, 2, 0}, {2, 3});
  check_both_orders("embedding", [&](const Inputs& in) {
    const Tensor rows = embedding(in[0], ids);
    return mul(rows, rows);
  }, {leaf({4, 2})});
  // The padding row gets no gradient by design; fn zeroes it, so finite differences agree.
  const Tensor keep_rows = tensor({0.0, 1.0, 1.0, 1.0}, {4, 1}, TensorOptions(kFloat64));
  check_both_orders("embedding (padding_idx)", [&](const Inputs& in) {
    const Tensor rows = embedding(mul(in[0], keep_rows), ids, 0);
    return mul(rows, rows);
  }, {leaf({4, 2})});
  // Each evaluation draws the same mask.
  check_both_orders("dropout (p = 0.4)", [](const Inputs& in) {
    manual_seed(5);
    const Tensor dropped = dropout(in[0], 0.4);
    return mul(dropped, in[0]);
  }, {leaf({3, 4})});
  check_both_orders("dropout (p = 1)", [](const Inputs& in) { return mul(dropout(in[0], 1.0), in[0]); },
                    {leaf({3})});

  const Tensor q = leaf({2, 2, 3, 4}), k = leaf({2, 2, 5, 4}), v = leaf({2, 2, 5, 3});
  const Tensor padding = tensor<bool>({true, true, true, false, false, true, true, true, true, true}, {2, 1, 1, 5});
  const Tensor additive = mul(randn({3, 5}, kFloat64), 0.5);
  check_both_orders("attention (bool padding mask)", [&](const Inputs& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = padding});
  }, {q, k, v});
  check_both_orders("attention (causal)", [&](const Inputs& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true});
  }, {q, k, v});
  check_both_orders("attention (float mask, scale)", [&](const Inputs& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = additive, .scale = 0.3});
  }, {q, k, v});
  check_both_orders("attention (dropout)", [&](const Inputs& in) {
    manual_seed(6);
    return scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = padding, .dropout_p = 0.3});
  }, {q, k, v});
  check_both_orders("attention (q, k and v one tensor, non-contiguous heads)", [&](const Inputs& in) {
    const Tensor heads = in[0].reshape({2, 3, 2, 2}).transpose(1, 2);
    return scaled_dot_product_attention(heads, heads, heads, {.is_causal = true});
  }, {leaf({2, 3, 4})});
}

// --- whole layers -------------------------------------------------------------------------------

namespace {

nn::TransformerLayerOptions tiny_layer(bool norm_first) {
  nn::TransformerLayerOptions options;
  options.d_model = 4;
  options.num_heads = 2;
  options.d_ff = 6;
  options.dropout = 0.0;
  options.norm_first = norm_first;
  options.activation = nn::Activation::GELU;
  return options;
}

Inputs with_parameters(Inputs inputs, const nn::Module& module) {
  for (const Tensor& p : module.parameters()) inputs.push_back(p);
  return inputs;
}

}  // namespace

TEST_CASE("layers: Linear, LayerNorm, MultiHeadAttention (padding and causal masks)") {
  manual_seed(18);
  nn::Linear linear_layer(4, 3);
  linear_layer.to(kFloat64);
  check_both_orders("nn::Linear", [&](const Inputs& in) { return linear_layer.forward(in[0]); },
                    with_parameters({leaf({2, 4})}, linear_layer));
  nn::LayerNorm norm(4);
  norm.to(kFloat64);
  check_both_orders("nn::LayerNorm", [&](const Inputs& in) { return norm.forward(in[0]); },
                    with_parameters({leaf({3, 4})}, norm));

  nn::MultiHeadAttention attention(4, 2);
  attention.to(kFloat64);
  const Tensor padding = tensor<bool>({false, false, true, false, false, false}, {2, 3});
  check_both_orders("nn::MultiHeadAttention (key padding mask)", [&](const Inputs& in) {
    return attention.forward(in[0], in[0], in[0], {.key_padding_mask = padding}).output;
  }, with_parameters({leaf({2, 3, 4})}, attention));
  check_both_orders("nn::MultiHeadAttention (causal)", [&](const Inputs& in) {
    return attention.forward(in[0], in[0], in[0], {.is_causal = true}).output;
  }, with_parameters({leaf({2, 3, 4})}, attention));
}

TEST_CASE("layers: a transformer encoder layer and a decoder layer, post-LN and pre-LN") {
  manual_seed(19);
  for (bool norm_first : {false, true}) {
    nn::TransformerEncoderLayer encoder(tiny_layer(norm_first));
    encoder.to(kFloat64);
    const Tensor padding = tensor({false, false, true}, {1, 3});
    check_both_orders(std::string("nn::TransformerEncoderLayer (padding") + (norm_first ? ", pre-LN)" : ", post-LN)"),
                      [&](const Inputs& in) { return encoder.forward(in[0], {.key_padding_mask = padding}); },
                      with_parameters({leaf({1, 3, 4})}, encoder));

    nn::TransformerDecoderLayer decoder(tiny_layer(norm_first));
    decoder.to(kFloat64);
    nn::DecoderMasks masks;
    masks.memory_key_padding_mask = tensor({false, true}, {1, 2});
    check_both_orders(std::string("nn::TransformerDecoderLayer (causal, memory padding") +
                          (norm_first ? ", pre-LN)" : ", post-LN)"),
                      [&](const Inputs& in) { return decoder.forward(in[0], in[1], masks); },
                      with_parameters({leaf({1, 3, 4}), leaf({1, 2, 4})}, decoder));
  }
}

TEST_CASE("the ops and layers checked to second order") {
  std::string list;
  for (const std::string& name : checked_cases()) list += "  " + name + "\n";
  std::cout << "gradcheck and gradgradcheck (float64) passed or were reported above for " << checked_cases().size()
            << " cases:\n"
            << list;
  CHECK(checked_cases().size() > 60);
}
