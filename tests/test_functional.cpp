// autograd::vjp, jvp, hvp, jacobian and hessian: against torch.autograd.functional's answers
// (tests/golden/functional.safetensors, written by tests/golden/make_functional_golden.py), to
// 1e-10 in float64, and against derivatives known in closed form.
#include <map>

#include "helpers.h"
#include "nn/io/safetensors.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr double kTolerance = 1e-10;

using Inputs = std::vector<Tensor>;

// The three functions of make_functional_golden.py, op for op.
Tensor products(const Inputs& in) { return mul(tanh(matmul(in[0], in[1])), sigmoid(slice(in[0], 1, 0, 2))); }

Tensor scalar_mix(const Inputs& in) {
  const Tensor& x = in[0];
  return add(logsumexp(matmul(in[1], x), {0}), sum(mul(mul(sin(x), x), x)));
}

Tensor normalised(const Inputs& in, const Tensor& w, const Tensor& b) {
  const Tensor y = gelu(layer_norm(in[0], {3}, w, b));
  return add(sum(mul(y, y)), sum(mul(softmax(in[0], -1), in[0])));
}

struct Golden {
  nn::StateDict tensors;
  const Tensor& operator[](const std::string& name) const {
    auto it = tensors.find(name);
    REQUIRE_MESSAGE(it != tensors.end(), "no tensor " << name << " in functional.safetensors");
    return it->second;
  }
};

const Golden& golden() {
  static const Golden file{nn::load_safetensors(std::string(EMBER_SOURCE_DIR) + "/tests/golden/functional.safetensors")};
  return file;
}

void check_golden(const Tensor& actual, const std::string& name) {
  INFO("golden tensor " << name);
  check_close(actual.detach(), golden()[name], kTolerance, 0);
}

}  // namespace

TEST_CASE("vjp, jvp and jacobian match torch.autograd.functional on a product with a slice") {
  const Golden& g = golden();
  const Inputs inputs{g["products.x"], g["products.w"]};
  const autograd::Derivative vjp = autograd::vjp(products, inputs, g["products.v"]);
  check_golden(vjp.value, "products.out");
  check_golden(vjp.derivatives[0], "products.vjp_x");
  check_golden(vjp.derivatives[1], "products.vjp_w");
  const autograd::Derivative jvp = autograd::jvp(products, inputs, {g["products.tx"], g["products.tw"]});
  check_golden(jvp.value, "products.out");
  REQUIRE(jvp.derivatives.size() == 1);
  check_golden(jvp.derivatives[0], "products.jvp");
  const std::vector<Tensor> jacobians = autograd::jacobian(products, inputs);
  CHECK(jacobians[0].sizes() == Shape{3, 2, 3, 4});
  check_golden(jacobians[0], "products.jacobian_x");
  check_golden(jacobians[1], "products.jacobian_w");
  // The caller's tensors are left alone.
  CHECK_FALSE(inputs[0].requires_grad());
  CHECK_FALSE(inputs[0].grad().defined());
}

TEST_CASE("hvp, hessian and the gradient match torch.autograd.functional on a scalar function of two inputs") {
  const Golden& g = golden();
  const Inputs inputs{g["scalar_mix.x"], g["scalar_mix.a"]};
  const autograd::Derivative hvp = autograd::hvp(scalar_mix, inputs, {g["scalar_mix.vx"], g["scalar_mix.va"]});
  check_golden(hvp.value, "scalar_mix.out");
  check_golden(hvp.derivatives[0], "scalar_mix.hvp_x");
  check_golden(hvp.derivatives[1], "scalar_mix.hvp_a");
  const autograd::Derivative gradient = autograd::vjp(scalar_mix, inputs);
  check_golden(gradient.derivatives[0], "scalar_mix.grad_x");
  check_golden(gradient.derivatives[1], "scalar_mix.grad_a");
  const std::vector<std::vector<Tensor>> hessian = autograd::hessian(scalar_mix, inputs);
  CHECK(hessian[0][1].sizes() == Shape{5, 5, 5});
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) check_golden(hessian[i][j], "scalar_mix.hessian_" + std::to_string(i) + std::to_string(j));
  }
}

TEST_CASE("hvp and hessian match torch.autograd.functional through layer_norm, gelu and softmax") {
  const Golden& g = golden();
  const Tensor w = g["normalised.w"], b = g["normalised.b"];
  auto fn = [&](const Inputs& in) { return normalised(in, w, b); };
  const autograd::Derivative hvp = autograd::hvp(fn, {g["normalised.x"]}, {g["normalised.vx"]});
  check_golden(hvp.value, "normalised.out");
  check_golden(hvp.derivatives[0], "normalised.hvp_x");
  check_golden(autograd::hessian(fn, {g["normalised.x"]})[0][0], "normalised.hessian");
}

TEST_CASE("the helpers against closed forms: the Hessian of x^3 is diag(6x), hvp is its product") {
  const Tensor x = tensor({1.0, -2.0, 0.5}, {3}, TensorOptions(kFloat64));
  auto cube_sum = [](const Inputs& in) { return sum(mul(in[0], mul(in[0], in[0]))); };
  const Tensor hessian = autograd::hessian(cube_sum, {x})[0][0];
  check_close(hessian, tensor({6.0, 0.0, 0.0, 0.0, -12.0, 0.0, 0.0, 0.0, 3.0}, {3, 3}, TensorOptions(kFloat64)), 1e-12, 0);
  const Tensor v = tensor({1.0, 1.0, 2.0}, {3}, TensorOptions(kFloat64));
  check_close(autograd::hvp(cube_sum, {x}, {v}).derivatives[0], matmul(hessian, v), 1e-12, 0);
  // A linear function: zero Hessian, and an input it ignores gets zeros.
  auto linear_in_first = [](const Inputs& in) { return sum(mul(in[0], 2.0)); };
  const std::vector<std::vector<Tensor>> blocks = autograd::hessian(linear_in_first, {x, x});
  CHECK(max_abs(blocks[0][0]) == 0.0);
  CHECK(max_abs(blocks[1][1]) == 0.0);
  check_close(autograd::vjp(linear_in_first, {x, x}).derivatives[1], zeros({3}, kFloat64), 0, 0);
}

TEST_CASE("the helpers with create_graph give differentiable results") {
  const Tensor x = as_leaf(tensor({1.0, 2.0}, {2}, TensorOptions(kFloat64)));
  auto cube_sum = [](const Inputs& in) { return sum(mul(in[0], mul(in[0], in[0]))); };
  const Tensor v = tensor({1.0, 0.0}, {2}, TensorOptions(kFloat64));
  const Tensor hv = autograd::hvp(cube_sum, {x}, {v}, /*create_graph=*/true).derivatives[0];  // (6 x0, 0)
  CHECK(hv.requires_grad());
  check_close(autograd::grad({sum(hv)}, {x})[0], tensor({6.0, 0.0}, {2}, TensorOptions(kFloat64)), 1e-12, 0);
}

TEST_CASE("the helpers' errors name what is wrong") {
  const Tensor x = zeros({3}, kFloat64);
  auto square = [](const Inputs& in) { return mul(in[0], in[0]); };
  CHECK_THROWS_WITH_ALL(autograd::vjp(square, {x}), "vjp", "one-element output", "[3]");
  CHECK_THROWS_WITH_ALL(autograd::vjp(square, {x}, zeros({2}, kFloat64)), "vjp", "[2]", "[3]");
  CHECK_THROWS_WITH_ALL(autograd::jvp(square, {x}, {zeros({4}, kFloat64)}), "jvp", "tangent 0", "[4]");
  CHECK_THROWS_WITH_ALL(autograd::jvp(square, {x}, {}), "jvp", "0 tangents for 1 inputs");
  CHECK_THROWS_WITH_ALL(autograd::hvp(square, {x}, {x}), "hvp", "one-element output");
  CHECK_THROWS_WITH_ALL(autograd::jacobian(square, {zeros({2}, kInt64)}), "jacobian", "input 0", "int64");
}
