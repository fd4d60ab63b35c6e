// Post-accumulate-grad hooks and end-of-pass callbacks: when they run, what they see, and
// the errors of misuse.
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("a post-accumulate hook runs once per pass, after every path's gradient is added") {
  Tensor x = tensor({1.0, 2.0}, {2}, kFloat64).requires_grad_();
  std::vector<std::vector<double>> seen;
  const autograd::HookId id =
      autograd::register_post_accumulate_grad_hook(x, [&](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector<double>()); });
  // x reaches the loss by three paths; the hook must see their sum, 2x + 3 + 1.
  Tensor loss = add(add(mul(x, x).sum(), mul(x, 3.0).sum()), x.sum());
  loss.backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{6.0, 8.0});
  // A second pass: the hook sees the accumulated gradient.
  mul(x, 2.0).sum().backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == std::vector<double>{8.0, 10.0});
  autograd::remove_post_accumulate_grad_hook(id);
  autograd::remove_post_accumulate_grad_hook(id);  // a second removal is ignored
  mul(x, 2.0).sum().backward();
  CHECK(seen.size() == 2);
}

TEST_CASE("hooks run as leaves complete, before the pass ends, and callbacks run at its end") {
  Tensor first = tensor({1.0}, {1}, kFloat64).requires_grad_();
  Tensor second = tensor({2.0}, {1}, kFloat64).requires_grad_();
  Tensor unused = tensor({3.0}, {1}, kFloat64).requires_grad_();
  std::vector<std::string> events;
  autograd::register_post_accumulate_grad_hook(first, [&](const Tensor&) {
    events.push_back("first");
    autograd::queue_callback([&] { events.push_back("end"); });
  });
  autograd::register_post_accumulate_grad_hook(second, [&](const Tensor&) { events.push_back("second"); });
  autograd::register_post_accumulate_grad_hook(unused, [&](const Tensor&) { events.push_back("unused"); });
  // second feeds the last op of the forward pass, so its gradient is complete first.
  Tensor loss = mul(exp(mul(first, 2.0)), second).sum();
  loss.backward();
  CHECK(events == std::vector<std::string>{"second", "first", "end"});
}

TEST_CASE("a hook on a root leaf runs, and the hook of a destroyed leaf never runs for a new one") {
  int calls = 0;
  {
    Tensor x = tensor({1.0}, {1}, kFloat64).requires_grad_();
    autograd::register_post_accumulate_grad_hook(x, [&](const Tensor&) { ++calls; });
    x.backward();
    CHECK(calls == 1);
  }
  for (int i = 0; i < 10; ++i) {
    Tensor other = tensor({1.0}, {1}, kFloat64).requires_grad_();
    mul(other, 2.0).sum().backward();
  }
  CHECK(calls == 1);
}

TEST_CASE("hook misuse throws a clear error") {
  Tensor x = tensor({1.0}, {1}, kFloat64);
  CHECK_THROWS_WITH_AS(autograd::register_post_accumulate_grad_hook(x, [](const Tensor&) {}),
                       doctest::Contains("expected a leaf that requires grad, got a tensor of shape [1] that does "
                                         "not require grad"),
                       Error);
  Tensor leaf = tensor({1.0}, {1}, kFloat64).requires_grad_();
  CHECK_THROWS_WITH_AS(autograd::register_post_accumulate_grad_hook(mul(leaf, 2.0), [](const Tensor&) {}),
                       doctest::Contains("was computed by an op"), Error);
  CHECK_THROWS_WITH_AS(autograd::queue_callback([] {}), doctest::Contains("queue_callback: no backward pass is running"),
                       Error);
}
