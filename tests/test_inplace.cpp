// In-place ops: values, broadcasting into self, copies between strided tensors, version
// counters, writes through views, errors, and gradients through in-place ops on non-leaves.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("add_ with alpha, a broadcast operand and a scalar") {
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, {2, 2});
  Tensor& result = x.add_(tensor({10.0, 20.0}, {2}));
  CHECK(&result == &x);
  CHECK(values(x) == std::vector<double>{11, 22, 13, 24});
  x.add_(tensor({1.0, 2.0}, {2, 1}), -2.0);
  CHECK(values(x) == std::vector<double>{9, 20, 9, 20});
  x.add_(0.5);
  CHECK(values(x) == std::vector<double>{9.5, 20.5, 9.5, 20.5});
  add_(x, scalar_tensor(1.0, kFloat64), 2.0);
  CHECK(values(x) == std::vector<double>{11.5, 22.5, 11.5, 22.5});

  Tensor i = tensor({1, 2, 3});
  i.add_(tensor({1, 1, 1}), 3.0);
  i.add_(-1.0);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{3, 4, 5});
  CHECK_THROWS_WITH_ALL(i.add_(0.5), "add_", "0.5", "int64");
  CHECK_THROWS_WITH_ALL(i.add_(tensor({1, 1, 1}), 0.5), "add_", "0.5", "int64");
}

TEST_CASE("mul_, zero_ and fill_") {
  Tensor x = tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  x.mul_(tensor({2.0f, 3.0f}, {2, 1}));
  CHECK(x.to_vector<float>() == std::vector<float>{2, 4, 6, 12, 15, 18});
  x.mul_(0.5);
  CHECK(x.to_vector<float>() == std::vector<float>{1, 2, 3, 6, 7.5, 9});
  x.zero_();
  CHECK(x.to_vector<float>() == std::vector<float>(6, 0.0f));
  x.fill_(-1.25);
  CHECK(x.to_vector<float>() == std::vector<float>(6, -1.25f));

  Tensor i = tensor({1, 2});
  i.fill_(7.0);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{7, 7});
  CHECK_THROWS_WITH_ALL(i.fill_(2.5), "fill_", "2.5", "int64");
  CHECK_THROWS_WITH_ALL(i.fill_(NAN), "fill_", "int64");
  CHECK_THROWS_WITH_ALL(i.mul_(0.5), "mul_", "0.5", "int64");
  Tensor b = tensor({true, false});
  b.fill_(1.0);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, true});
  CHECK_THROWS_WITH_ALL(b.mul_(b), "mul_", "bool");
}

TEST_CASE("in-place ops on non-contiguous tensors touch only their elements") {
  Tensor base = zeros({3, 4}, kFloat64);
  Tensor column_pairs = base.slice(1, 0, 4, 2);  // columns 0 and 2
  column_pairs.add_(tensor({1.0, 2.0}, {2}));
  CHECK(values(base) == std::vector<double>{1, 0, 2, 0, 1, 0, 2, 0, 1, 0, 2, 0});
  Tensor transposed = base.t();  // [4, 3]
  transposed.mul_(tensor({1.0, 10.0, 100.0}, {3}));
  CHECK(values(base) == std::vector<double>{1, 0, 2, 0, 10, 0, 20, 0, 100, 0, 200, 0});
  base.select(1, 1).fill_(-1.0);
  CHECK(values(base) == std::vector<double>{1, -1, 2, 0, 10, -1, 20, 0, 100, -1, 200, 0});
}

TEST_CASE("copy_ broadcasts, copies between strided tensors and refuses other dtypes") {
  Tensor x = zeros({2, 3});
  x.copy_(tensor({1.0f, 2.0f, 3.0f}));
  CHECK(x.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
  x.copy_(scalar_tensor(4.0));
  CHECK(x.to_vector<float>() == std::vector<float>(6, 4.0f));

  // Source: a transposed [3, 2] view; destination: every other column of a [2, 6] tensor, seen
  // transposed as [3, 2].
  Tensor source = arange(6.0, kFloat64).reshape({2, 3}).t();  // [[0, 3], [1, 4], [2, 5]]
  Tensor target = zeros({2, 6}, kFloat64);
  Tensor window = target.slice(1, 0, 6, 2).t();
  CHECK_FALSE(source.is_contiguous());
  CHECK_FALSE(window.is_contiguous());
  window.copy_(source);
  CHECK(values(target) == std::vector<double>{0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0});

  // Large enough to run split across threads.
  Tensor big_source = rand({300, 400}, kFloat64);
  Tensor big_target = zeros({400, 600}, kFloat64);
  big_target.slice(1, 0, 600, 2).slice(1, 0, 300).copy_(big_source.t());
  CHECK(values(big_target.slice(1, 0, 600, 2).slice(1, 0, 300).contiguous()) == values(big_source.t()));

  CHECK_THROWS_WITH_ALL(x.copy_(ones({2, 3}, kFloat64)), "copy_", "dtype mismatch", "float32", "float64");
  CHECK_THROWS_WITH_ALL(x.copy_(ones({4})), "copy_", "[4]", "cannot be broadcast", "[2, 3]");
  CHECK_THROWS_WITH_ALL(x.copy_(ones({1, 2, 3})), "copy_", "[1, 2, 3]", "[2, 3]");
}

TEST_CASE("every in-place op bumps the version counter shared with views") {
  Tensor x = zeros({2, 2});
  Tensor view = x.t();
  CHECK(x.version() == 0);
  x.add_(1.0);
  CHECK(x.version() == 1);
  x.mul_(2.0);
  CHECK(x.version() == 2);
  x.fill_(3.0);
  CHECK(x.version() == 3);
  x.zero_();
  CHECK(x.version() == 4);
  view.copy_(ones({2, 2}));
  CHECK(x.version() == 5);
  CHECK(view.version() == 5);
  CHECK(add(x, 1.0).version() == 0);  // out-of-place results start fresh
  CHECK(x.version() == 5);
}

TEST_CASE("in-place errors name the op and the shapes") {
  Tensor x = zeros({2, 2});
  CHECK_THROWS_WITH_ALL(x.add_(ones({3})), "add_", "shape [3] cannot be broadcast", "[2, 2]");
  CHECK_THROWS_WITH_ALL(zeros({2}).add_(ones({2, 2})), "add_", "[2, 2]", "[2]");  // never grows self
  CHECK_THROWS_WITH_ALL(x.mul_(ones({2, 3})), "mul_", "[2, 3]", "[2, 2]");
  CHECK_THROWS_WITH_ALL(x.add_(ones({2, 2}, kFloat64)), "add_", "dtype mismatch", "float32", "float64");

  Tensor w = ones({2}, TensorOptions(kFloat64).requires_grad(true));
  for (auto update : std::vector<std::function<void(Tensor&)>>{
           [](Tensor& t) { t.add_(1.0); }, [](Tensor& t) { t.mul_(2.0); }, [](Tensor& t) { t.zero_(); },
           [](Tensor& t) { t.fill_(1.0); }, [](Tensor& t) { t.copy_(zeros({2}, kFloat64)); }}) {
    CHECK_THROWS_WITH_ALL(update(w), "leaf tensor that requires grad", "in-place", "NoGradGuard");
  }
  CHECK_THROWS_WITH_ALL(w.add_(1.0), "add_:");
  CHECK_THROWS_WITH_ALL(w.copy_(zeros({2}, kFloat64)), "copy_:");
  CHECK(w.version() == 0);  // nothing was written
  {
    NoGradGuard no_grad;  // how optimizers update parameters
    w.add_(ones({2}, kFloat64), -0.5);
  }
  CHECK(values(w) == std::vector<double>{0.5, 0.5});
  CHECK(w.is_leaf());

  // A view of a tensor that takes part in autograd cannot be written in place.
  Tensor y = mul(w, 2.0);
  Tensor row = y.slice(0, 0, 1);
  CHECK_THROWS_WITH_ALL(row.add_(1.0), "add_", "view", "autograd");
}

TEST_CASE("gradients flow through in-place ops on non-leaves") {
  using Inputs = const std::vector<Tensor>&;
  // y = (x * 1 + 2 * other) * scale, written in place, with broadcast operands.
  CHECK_GRADCHECK(
      [](Inputs in) {
        Tensor y = mul(in[0], 1.0);
        y.add_(in[1], 2.0);
        y.mul_(in[2]);
        y.add_(0.5);
        y.mul_(3.0);
        return y;
      },
      {leaf({2, 3}), leaf({3}), leaf({2, 1})});
  // Non-contiguous operands.
  CHECK_GRADCHECK(
      [](Inputs in) {
        Tensor y = sin(in[0]);  // saves its input, not y
        y.add_(in[1].t());
        y.mul_(in[1].t());
        return y;
      },
      {as_leaf(leaf({3, 2}).t()), leaf({3, 2})});
  // copy_ overwrites: the old value gets no gradient, the source gets all of it.
  CHECK_GRADCHECK(
      [](Inputs in) {
        Tensor y = mul(in[0], 2.0);
        Tensor z = add(y, 1.0);  // uses y before it is overwritten
        y.copy_(in[1]);
        return mul(y, z);
      },
      {leaf({2, 3}), leaf({3})});
  // fill_ and zero_ cut the gradient to what came before.
  CHECK_GRADCHECK(
      [](Inputs in) {
        Tensor y = mul(in[0], in[0]);
        Tensor kept = mul(y, 1.0);
        y.fill_(2.0);
        return add(mul(y, in[0]), kept);
      },
      {leaf({4})});

  // By hand: y = x * 3, y *= x, so dy/dx = 6x.
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  Tensor y = mul(x, 3.0);
  y.mul_(x);
  CHECK(y.grad_fn()->name() == "MulBackward");
  y.sum().backward();
  check_close(x.grad(), tensor({6.0, 12.0}, {2}));
}

TEST_CASE("an in-place write to a tensor saved for backward is caught") {
  Tensor x = tensor({1.0, 2.0}, {2}).requires_grad_();
  Tensor y = exp(x);      // saves its output y
  Tensor z = mul(y, 2.0);
  y.add_(1.0);
  CHECK_THROWS_WITH_ALL(z.sum().backward(), "ExpBackward", "modified by an in-place operation");
}
