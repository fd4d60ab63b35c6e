// View ops: shapes, strides and shared storage, copies only where reshape must, errors, and
// gradients through each view and chains of them.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

// 0, 1, 2, ... as float64 in the given shape: every element tells where it came from.
Tensor iota(const Shape& shape) { return arange(static_cast<double>(numel_of(shape)), kFloat64).reshape(shape); }

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace

TEST_CASE("view gives new shapes over the same storage, with one inferred size") {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({6, 4});
  CHECK(v.sizes() == Shape{6, 4});
  CHECK(v.strides() == Shape{4, 1});
  CHECK(shares_storage(v, x));
  CHECK(x.view({-1}).sizes() == Shape{24});
  CHECK(x.view({2, -1, 3}).sizes() == Shape{2, 4, 3});
  CHECK(x.view({1, 24, 1}).sizes() == Shape{1, 24, 1});
  CHECK(values(x.view({4, 6})) == values(x));
  // A transposed tensor can still split or keep dims that stay in order.
  Tensor t = iota({4, 6}).t();  // [6, 4], strides [1, 6]
  CHECK(t.view({3, 2, 4}).strides() == Shape{2, 1, 6});
  CHECK(t.view({6, 2, 2}).strides() == Shape{1, 12, 6});

  CHECK_THROWS_WITH_ALL(t.view({24}), "view", "[24]", "incompatible", "shape [6, 4]", "strides [1, 6]",
                        "reshape");
  CHECK_THROWS_WITH_ALL(x.view({5, -1}), "view", "[5, -1]", "[2, 3, 4]", "24 elements");
  CHECK_THROWS_WITH_ALL(x.view({-1, -1}), "view", "only one dimension can be -1");
  CHECK_THROWS_WITH_ALL(x.view({4, 5}), "view", "[4, 5]", "[2, 3, 4]");
  CHECK_THROWS_WITH_ALL(x.view({-2, 12}), "view", "invalid size -2");
}

TEST_CASE("reshape views when the strides allow it and copies only when it must") {
  Tensor x = iota({2, 3, 4});
  CHECK(shares_storage(x.reshape({4, 6}), x));
  CHECK(shares_storage(x.reshape({24}), x));

  Tensor t = x.transpose(1, 2);  // [2, 4, 3]
  Tensor merged_outer = t.reshape({8, 3});
  CHECK_FALSE(shares_storage(merged_outer, x));
  CHECK(merged_outer.is_contiguous());
  CHECK(values(merged_outer) == values(t));
  CHECK(shares_storage(t.reshape({2, 2, 2, 3}), x));  // splitting one dim keeps the layout

  // Every other column of rows of 6 is a plain stride-2 run: flattening it is still a view.
  Tensor strided = iota({4, 6}).slice(1, 0, 6, 2);  // [4, 3], strides [6, 2]
  CHECK(shares_storage(strided.reshape({12}), strided));
  CHECK(strided.reshape({12}).strides() == Shape{2});
  Tensor sliced = iota({4, 6}).slice(1, 0, 4, 2);  // [4, 2], strides [6, 2]: gaps between rows
  CHECK(shares_storage(sliced.reshape({2, 2, 2}), sliced));
  CHECK_FALSE(shares_storage(sliced.reshape({8}), sliced));
  CHECK(values(sliced.reshape({8})) == std::vector<double>{0, 2, 6, 8, 12, 14, 18, 20});

  Tensor expanded = iota({1, 4}).expand({3, 4});
  CHECK(shares_storage(expanded.reshape({3, 2, 2}), expanded));
  Tensor flat = expanded.reshape({12});
  CHECK_FALSE(shares_storage(flat, expanded));
  CHECK(values(flat) == std::vector<double>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});

  CHECK(iota({}).reshape({1, 1}).sizes() == Shape{1, 1});
  CHECK(zeros({0, 3}).reshape({3, -1, 2}).sizes() == Shape{3, 0, 2});
  CHECK_THROWS_WITH_ALL(x.reshape({7, -1}), "reshape", "[7, -1]", "[2, 3, 4]");
}

TEST_CASE("transpose, t and permute swap sizes and strides") {
  Tensor x = iota({2, 3, 4});
  Tensor y = x.transpose(0, 2);
  CHECK(y.sizes() == Shape{4, 3, 2});
  CHECK(y.strides() == Shape{1, 4, 12});
  CHECK(shares_storage(y, x));
  CHECK(y.at<double>(3, 1, 0) == x.at<double>(0, 1, 3));
  CHECK(x.transpose(-1, 0).sizes() == Shape{4, 3, 2});

  Tensor m = iota({2, 3});
  CHECK(m.t().sizes() == Shape{3, 2});
  CHECK(values(m.t()) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(iota({3}).t().sizes() == Shape{3});
  CHECK_THROWS_WITH_ALL(x.t(), "t:", "rank <= 2", "[2, 3, 4]");
  CHECK_THROWS_WITH_ALL(x.transpose(0, 3), "transpose", "dim 3", "rank 3");

  Tensor p = x.permute({2, 0, 1});
  CHECK(p.sizes() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(p.at<double>(3, 1, 2) == x.at<double>(1, 2, 3));
  CHECK(x.permute({-1, 0, 1}).sizes() == Shape{4, 2, 3});
  CHECK_THROWS_WITH_ALL(x.permute({0, 1}), "permute", "2 dims", "rank 3");
  CHECK_THROWS_WITH_ALL(x.permute({0, 1, 1}), "permute", "dim 1 repeats", "[0, 1, 1]");
  CHECK_THROWS_WITH_ALL(x.permute({0, 1, 5}), "permute", "dim 5");
}

TEST_CASE("unsqueeze, squeeze and flatten") {
  Tensor x = iota({2, 3});
  CHECK(x.unsqueeze(0).sizes() == Shape{1, 2, 3});
  CHECK(x.unsqueeze(1).sizes() == Shape{2, 1, 3});
  CHECK(x.unsqueeze(2).sizes() == Shape{2, 3, 1});
  CHECK(x.unsqueeze(-1).sizes() == Shape{2, 3, 1});
  CHECK(x.unsqueeze(1).is_contiguous());
  CHECK(shares_storage(x.unsqueeze(0), x));
  CHECK(iota({}).unsqueeze(0).sizes() == Shape{1});
  CHECK_THROWS_WITH_ALL(x.unsqueeze(3), "unsqueeze", "dim 3");

  Tensor y = iota({1, 2, 1, 3, 1});
  CHECK(y.squeeze().sizes() == Shape{2, 3});
  CHECK(y.squeeze(2).sizes() == Shape{1, 2, 3, 1});
  CHECK(y.squeeze(-1).sizes() == Shape{1, 2, 1, 3});
  CHECK(y.squeeze(1).sizes() == y.sizes());  // not size 1: unchanged
  CHECK(values(y.squeeze()) == values(y));
  CHECK(iota({1, 1}).squeeze().dim() == 0);
  CHECK_THROWS_WITH_ALL(y.squeeze(5), "squeeze", "dim 5");

  Tensor z = iota({2, 3, 4, 5});
  CHECK(z.flatten().sizes() == Shape{120});
  CHECK(z.flatten(1).sizes() == Shape{2, 60});
  CHECK(z.flatten(1, 2).sizes() == Shape{2, 12, 5});
  CHECK(z.flatten(-2, -1).sizes() == Shape{2, 3, 20});
  CHECK(shares_storage(z.flatten(1, 2), z));
  CHECK(iota({}).flatten().sizes() == Shape{1});
  CHECK_THROWS_WITH_ALL(z.flatten(2, 1), "flatten", "start_dim 2", "end_dim 1");
}

TEST_CASE("expand broadcasts size-1 and new leading dims with stride 0") {
  Tensor x = iota({3, 1});
  Tensor e = x.expand({2, 3, 4});
  CHECK(e.sizes() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(shares_storage(e, x));
  CHECK(e.at<double>(1, 2, 3) == 2.0);
  CHECK(x.expand({-1, 5}).sizes() == Shape{3, 5});
  CHECK(x.expand_as(zeros({3, 2})).sizes() == Shape{3, 2});
  CHECK_THROWS_WITH_ALL(x.expand({2, 4}), "expand", "[3, 1]", "[2, 4]", "dim 0: 3 vs 2");
  CHECK_THROWS_WITH_ALL(x.expand({4}), "expand", "[3, 1]", "fewer dims");
  CHECK_THROWS_WITH_ALL(x.expand({-1, 3, 1}), "expand", "-1", "new leading dim");
  CHECK_THROWS_WITH_ALL(x.expand({3, -2}), "expand", "invalid size -2");
}

TEST_CASE("narrow and slice follow Python's indexing, select removes the dim") {
  Tensor x = iota({10});
  CHECK(values(x.slice(0, 2, 5)) == std::vector<double>{2, 3, 4});
  CHECK(values(x.slice(0, -3, std::nullopt)) == std::vector<double>{7, 8, 9});
  CHECK(values(x.slice(0, std::nullopt, -7)) == std::vector<double>{0, 1, 2});
  CHECK(values(x.slice(0, 1, 8, 3)) == std::vector<double>{1, 4, 7});
  CHECK(values(x.slice(0, std::nullopt, std::nullopt, 4)) == std::vector<double>{0, 4, 8});
  CHECK(values(x.slice(0, -100, 100)) == values(x));  // clamped
  CHECK(x.slice(0, 7, 3).numel() == 0);
  CHECK(x.slice(0, 20, 30).numel() == 0);
  CHECK(x.slice(0, 1, 8, 3).strides() == Shape{3});
  CHECK(x.slice(0, 1, 8, 3).storage_offset() == 1);
  CHECK(shares_storage(x.slice(0, 2, 5), x));
  CHECK_THROWS_WITH_ALL(x.slice(0, 0, 5, 0), "slice", "step must be positive, got 0");
  CHECK_THROWS_WITH_ALL(x.slice(0, 0, 5, -1), "slice", "step must be positive, got -1");
  CHECK_THROWS_WITH_ALL(scalar_tensor(1.0).slice(0, 0, 1), "slice", "0-d");

  Tensor m = iota({3, 4});
  CHECK(values(m.narrow(1, 1, 2)) == std::vector<double>{1, 2, 5, 6, 9, 10});
  CHECK(values(m.narrow(0, -1, 1)) == std::vector<double>{8, 9, 10, 11});
  CHECK(m.narrow(1, 4, 0).sizes() == Shape{3, 0});
  CHECK_THROWS_WITH_ALL(m.narrow(1, 3, 2), "narrow", "start 3", "length 2", "dim 1 of size 4", "[3, 4]");

  CHECK(values(m.select(0, 1)) == std::vector<double>{4, 5, 6, 7});
  CHECK(values(m.select(1, -1)) == std::vector<double>{3, 7, 11});
  CHECK(m.select(1, 2).sizes() == Shape{3});
  CHECK(iota({3}).select(0, 2).dim() == 0);
  CHECK(shares_storage(m.select(0, 1), m));
  CHECK_THROWS_WITH_ALL(m.select(0, 3), "select", "index 3", "dim 0 of size 3", "[3, 4]");
  CHECK_THROWS_WITH_ALL(m.select(1, -5), "select", "index -5", "dim 1 of size 4");
}

TEST_CASE("contiguous copies only a non-contiguous tensor; clone always copies") {
  Tensor x = iota({2, 3});
  CHECK(x.contiguous().impl() == x.impl());
  Tensor t = x.t();
  CHECK_FALSE(t.is_contiguous());
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(shares_storage(c, x));
  CHECK(values(c) == std::vector<double>{0, 3, 1, 4, 2, 5});

  Tensor k = x.clone();
  CHECK_FALSE(shares_storage(k, x));
  CHECK(values(k) == values(x));
  k.fill_(1.0);
  CHECK(values(x) == std::vector<double>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("views see in-place writes to their base and write through to it") {
  Tensor x = zeros({3, 4}, kFloat64);
  Tensor row = x.select(0, 1);
  Tensor column = x.t().select(0, 2);  // x[:, 2]
  Tensor every_other = x.view({12}).slice(0, 0, 12, 2);
  x.add_(1.0);
  CHECK(values(row) == std::vector<double>(4, 1.0));
  row.fill_(5.0);
  CHECK(values(x.select(0, 1)) == std::vector<double>(4, 5.0));
  CHECK(column.at<double>(1) == 5.0);
  every_other.mul_(2.0);
  CHECK(values(x) == std::vector<double>{2, 1, 2, 1, 10, 5, 10, 5, 2, 1, 2, 1});
  CHECK(x.version() == 3);
  CHECK(row.version() == 3);  // one counter per storage
}

TEST_CASE("gradients flow through every view op") {
  using Inputs = const std::vector<Tensor>&;
  CHECK_GRADCHECK([](Inputs in) { return in[0].view({3, 4}); }, {leaf({2, 6})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].view({-1}); }, {leaf({2, 3})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].reshape({4, 3}); }, {leaf({3, 4})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].transpose(0, 2); }, {leaf({2, 3, 2})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].t(); }, {leaf({2, 3})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].permute({1, 2, 0}); }, {leaf({2, 3, 2})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].unsqueeze(1); }, {leaf({2, 3})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].squeeze(); }, {leaf({2, 1, 3})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].squeeze(1); }, {leaf({2, 1, 3})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].flatten(1); }, {leaf({2, 2, 3})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].expand({2, 3, 4}); }, {leaf({3, 1})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].narrow(1, 1, 2); }, {leaf({2, 4})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].slice(0, 1, std::nullopt, 2); }, {leaf({6, 2})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].slice(1, -3, -1); }, {leaf({2, 5})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].select(1, -1); }, {leaf({3, 4})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].contiguous(); }, {as_leaf(leaf({3, 4}).t())});
  CHECK_GRADCHECK([](Inputs in) { return in[0].clone(); }, {leaf({3})});
}

TEST_CASE("gradients flow through chains of views, copies and non-contiguous leaves") {
  using Inputs = const std::vector<Tensor>&;
  // reshape of a transpose must copy; its backward maps back through both.
  CHECK_GRADCHECK([](Inputs in) { return in[0].t().reshape({12}); }, {leaf({3, 4})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].permute({2, 0, 1}).flatten(0, 1).slice(0, 1, 5, 2); },
                  {leaf({2, 3, 4})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].select(0, 1).unsqueeze(0).expand({3, 4}).t(); }, {leaf({2, 4})});
  // An expanded input used twice: the gradients of both uses add up.
  CHECK_GRADCHECK(
      [](Inputs in) {
        Tensor e = in[0].expand({3, 4});
        return mul(e, e.slice(0, 0, 3).contiguous());
      },
      {leaf({4})});
  CHECK_GRADCHECK([](Inputs in) { return in[0].reshape({2, 6}).narrow(1, 2, 3); }, {as_leaf(leaf({4, 3}).t())});
  CHECK_GRADCHECK([](Inputs in) { return in[0].transpose(0, 1).squeeze(0); },
                  {as_leaf(leaf({3, 1, 2}).slice(0, 0, 3, 2))});
}
