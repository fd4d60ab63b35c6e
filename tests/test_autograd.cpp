// The autograd engine: recording, accumulation, retain_graph, in-place versions, deep graphs.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("backward of a small expression gives the hand-computed gradients") {
  Tensor a = tensor({1.0, 2.0, 3.0}, {3}, kFloat64).requires_grad_();
  Tensor b = tensor({4.0, 5.0, 6.0}, {3}, kFloat64).requires_grad_();
  Tensor loss = sum(add(mul(a, b), a));  // d/da = b + 1, d/db = a
  loss.backward();
  check_close(a.grad(), tensor({5.0, 6.0, 7.0}, {3}));
  check_close(b.grad(), tensor({1.0, 2.0, 3.0}, {3}));
}

TEST_CASE("gradients accumulate over backward calls until zeroed") {
  Tensor x = tensor({2.0}, {1}, kFloat64).requires_grad_();
  mul(x, x).sum().backward();
  mul(x, x).sum().backward();
  check_close(x.grad(), tensor({8.0}, {1}));  // 2 * (2x) at x = 2
  x.mutable_grad().zero_();
  mul(x, 3.0).sum().backward();
  check_close(x.grad(), tensor({3.0}, {1}));
}

TEST_CASE("a second backward through a freed graph throws, retain_graph allows it") {
  Tensor x = tensor({1.0, 2.0}, {2}, kFloat64).requires_grad_();
  Tensor y = mul(x, x).sum();
  y.backward({.retain_graph = true});
  y.backward();
  check_close(x.grad(), tensor({4.0, 8.0}, {2}));
  CHECK_THROWS_WITH_ALL(y.backward(), "backward through the graph a second time", "retain_graph");
}

TEST_CASE("backward's options: retain_graph defaults to create_graph, a gradient goes with them") {
  Tensor x = tensor({1.0, 2.0}, {2}, kFloat64).requires_grad_();
  // By default the graph is freed and .grad has no history.
  const Tensor y = mul(x, x).sum();
  y.backward();
  CHECK_FALSE(x.grad().requires_grad());
  CHECK_THROWS_WITH_ALL(y.backward(), "second time", "retain_graph");

  // create_graph records .grad and keeps the graph...
  x.mutable_grad() = Tensor();
  const Tensor z = mul(x, x).sum();
  z.backward({.create_graph = true});
  CHECK(x.grad().requires_grad());
  z.backward();
  check_close(x.grad().detach(), tensor({4.0, 8.0}, {2}));
  // ...unless retain_graph says otherwise.
  const Tensor w = mul(x, x).sum();
  w.backward({.retain_graph = false, .create_graph = true});
  CHECK_THROWS_WITH_ALL(w.backward(), "second time");

  // A gradient for a tensor of several elements, with options.
  x.mutable_grad() = Tensor();
  const Tensor v = mul(x, x);
  v.backward(tensor({1.0, -1.0}, {2}, kFloat64), {.retain_graph = true});
  CHECK_FALSE(x.grad().requires_grad());
  v.backward(tensor({1.0, 1.0}, {2}, kFloat64));
  check_close(x.grad(), tensor({4.0, 0.0}, {2}));  // 2x * (1, -1) + 2x * (1, 1)
}

TEST_CASE("backward errors: no grad, non-scalar without gradient") {
  Tensor x = tensor({1.0, 2.0}, {2}, kFloat64);
  CHECK_THROWS_WITH_ALL(x.sum().backward(), "does not require grad");
  Tensor w = tensor({1.0, 2.0}, {2}, kFloat64).requires_grad_();
  CHECK_THROWS_WITH_ALL(mul(w, 2.0).backward(), "only for one-element outputs", "[2]");
}

TEST_CASE("NoGradGuard stops recording") {
  Tensor x = ones({2}, TensorOptions(kFloat64).requires_grad(true));
  {
    NoGradGuard no_grad;
    Tensor y = mul(x, 2.0);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  CHECK(mul(x, 2.0).requires_grad());
}

TEST_CASE("a tensor modified in place after being saved makes backward throw") {
  Tensor x = tensor({1.0, 2.0}, {2}, kFloat64).requires_grad_();
  Tensor y = mul(x, 1.0);     // non-leaf
  Tensor z = mul(y, y).sum();  // saves y
  y.add_(1.0);
  CHECK(y.version() == 1);
  CHECK_THROWS_WITH_ALL(z.backward(), "MulBackward", "modified by an in-place operation");
}

TEST_CASE("in-place ops on a leaf that requires grad throw unless grad mode is off") {
  Tensor w = ones({3}, TensorOptions(kFloat64).requires_grad(true));
  CHECK_THROWS_WITH_ALL(w.add_(1.0), "add_", "leaf tensor that requires grad");
  {
    NoGradGuard no_grad;
    w.add_(1.0);
  }
  check_close(w, full({3}, 2.0, kFloat64));
}

TEST_CASE("in-place ops on non-leaves join the graph") {
  Tensor x = tensor({1.0, 2.0}, {2}, kFloat64).requires_grad_();
  Tensor y = mul(x, 3.0);
  y.mul_(tensor({2.0, 2.0}, {2}, kFloat64));
  y.add_(x);
  y.sum().backward();  // y = 6x + x
  check_close(x.grad(), tensor({7.0, 7.0}, {2}));
}

TEST_CASE("a chain of 100,000 ops backpropagates without overflowing the stack") {
  Tensor x = ones({1}, TensorOptions(kFloat64).requires_grad(true));
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = add(y, 1e-6);
  y.backward();
  check_close(x.grad(), ones({1}, kFloat64));
  y = Tensor();  // dropping the graph must not recurse either
}

TEST_CASE("anomaly mode names the op that produced NaN or inf") {
  Tensor x = tensor({-1.0, 4.0}, {2}, kFloat64).requires_grad_();
  {
    DetectAnomalyGuard anomaly;
    CHECK_THROWS_WITH_ALL(log(x), "log", "NaN or inf");
    Tensor zero = tensor({0.0}, {1}, kFloat64).requires_grad_();
    Tensor root = sqrt(zero);  // forward 0 is fine; backward 0.5 / 0 is inf
    CHECK_THROWS_WITH_ALL(root.sum().backward(), "SqrtBackward", "NaN or inf");
  }
  CHECK_NOTHROW(log(x));  // off by default
}

struct Square {
  static constexpr const char* name = "square";
  static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
    ctx.save_for_backward({inputs[0]});
    return mul(inputs[0], inputs[0]);
  }
  static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad_output) {
    return {mul(grad_output, mul(ctx.saved_tensors()[0], 2.0))};
  }
};

TEST_CASE("a user op through the extension API records one node and passes gradcheck") {
  Tensor x = leaf({3, 2});
  Tensor y = autograd::apply<Square>({x});
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name() == "SquareBackward");
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return autograd::apply<Square>({in[0]}); },
                  std::vector<Tensor>{x});
}

TEST_CASE("gradcheck reports a wrong backward") {
  struct WrongSquare {
    static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
      ctx.save_for_backward({inputs[0]});
      return mul(inputs[0], inputs[0]);
    }
    static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad_output) {
      return {mul(grad_output, ctx.saved_tensors()[0])};  // forgot the factor 2
    }
  };
  Tensor x = leaf({4});
  const GradcheckReport report =
      gradcheck([](const std::vector<Tensor>& in) { return autograd::apply<WrongSquare>({in[0]}); }, {x});
  CHECK_FALSE(report.passed);
  CHECK(report.inputs[0].max_abs_error > 0.1);
  CHECK(report.summary().find("FAILED") != std::string::npos);
}

TEST_CASE("gradcheck checks that inputs without requires_grad get no gradient") {
  Tensor x = leaf({3});
  Tensor constant = randn({3}, kFloat64);
  const GradcheckReport report = gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[1]); },
                                           {x, constant});
  CHECK(report.passed);
  CHECK_FALSE(report.inputs[1].requires_grad);
}
