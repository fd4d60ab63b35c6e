// linear_cross_entropy against the composition it replaces, cross_entropy(linear(x, weight)):
// the same loss and gradients whatever the chunk size (one row, a ragged last chunk, one chunk
// for everything), with ignored targets, label smoothing, both reductions that chunk and the one
// that does not, under autocast, through gradcheck and gradgradcheck, and its errors.
#include <vector>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

Tensor composed(const Tensor& x, const Tensor& weight, const Tensor& targets, const CrossEntropyOptions& options) {
  return cross_entropy(linear(x, weight), targets, options);
}

// Loss and the gradients of x and weight, from a fresh pair of leaves with the given values.
struct LossAndGradients {
  Tensor loss, grad_x, grad_weight;
};

template <class Loss>
LossAndGradients run(const Tensor& x_values, const Tensor& weight_values, Loss&& loss_of) {
  const Tensor x = as_leaf(x_values), weight = as_leaf(weight_values);
  const Tensor loss = loss_of(x, weight);
  loss.backward();
  return {loss.detach(), x.grad(), weight.grad()};
}

}  // namespace

TEST_CASE("linear_cross_entropy equals cross_entropy(linear(...)) in loss and gradients for every chunk size") {
  manual_seed(3);
  const Tensor x = randn({2, 7, 6}, kFloat64), weight = randn({11, 6}, kFloat64);
  const Tensor targets = tensor<int64_t>({3, -100, 0, 10, 5, 5, 1, 2, 9, -100, 4, 7, 8, 6}, {2, 7});
  for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    for (double smoothing : {0.0, 0.2}) {
      CrossEntropyOptions options;
      options.reduction = reduction;
      options.label_smoothing = smoothing;
      const LossAndGradients expected = run(x, weight, [&](const Tensor& a, const Tensor& w) {
        const Tensor loss = composed(a, w, targets, options);
        return reduction == Reduction::None ? sum(loss) : loss;
      });
      for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{14}, int64_t{0}}) {
        CAPTURE(chunk);
        CAPTURE(smoothing);
        const LossAndGradients actual = run(x, weight, [&](const Tensor& a, const Tensor& w) {
          const Tensor loss = linear_cross_entropy(a, w, targets, options, chunk);
          return reduction == Reduction::None ? sum(loss) : loss;
        });
        check_close(actual.loss, expected.loss, 1e-12, 1e-12);
        check_close(actual.grad_x, expected.grad_x, 1e-12, 1e-12);
        check_close(actual.grad_weight, expected.grad_weight, 1e-12, 1e-12);
      }
    }
  }
}

TEST_CASE("linear_cross_entropy scales its gradients by the loss's own gradient") {
  manual_seed(4);
  const Tensor x = randn({5, 4}, kFloat64), weight = randn({9, 4}, kFloat64);
  const Tensor targets = tensor<int64_t>({1, 2, 3, 4, 8}, {5});
  const LossAndGradients expected =
      run(x, weight, [&](const Tensor& a, const Tensor& w) { return mul(composed(a, w, targets, {}), -2.5); });
  const LossAndGradients actual = run(x, weight, [&](const Tensor& a, const Tensor& w) {
    return mul(linear_cross_entropy(a, w, targets, {}, 2), -2.5);
  });
  check_close(actual.grad_x, expected.grad_x, 1e-12, 1e-12);
  check_close(actual.grad_weight, expected.grad_weight, 1e-12, 1e-12);
}

TEST_CASE("linear_cross_entropy passes gradcheck and gradgradcheck") {
  manual_seed(5);
  const Tensor targets = tensor<int64_t>({1, -100, 3, 0, 2}, {5});
  for (Reduction reduction : {Reduction::Mean, Reduction::Sum}) {
    CrossEntropyOptions options;
    options.reduction = reduction;
    options.label_smoothing = 0.1;
    const auto fn = [&](const std::vector<Tensor>& in) { return linear_cross_entropy(in[0], in[1], targets, options, 2); };
    CHECK_GRADCHECK(fn, std::vector<Tensor>{leaf({5, 3}), leaf({4, 3})});
    const GradcheckReport second = gradgradcheck(fn, std::vector<Tensor>{leaf({5, 3}), leaf({4, 3})});
    CHECK_MESSAGE(second.passed, second.summary());
  }
}

TEST_CASE("linear_cross_entropy without a gradient to compute, and with every target ignored") {
  manual_seed(6);
  const Tensor x = randn({6, 4}, kFloat64), weight = randn({5, 4}, kFloat64);
  const Tensor targets = tensor<int64_t>({0, 1, 2, 3, 4, 0}, {6});
  {
    NoGradGuard no_grad;
    check_close(linear_cross_entropy(x, weight, targets, {}, 4), composed(x, weight, targets, {}), 1e-12, 1e-12);
  }
  const Tensor ignored = full_int64({6}, -100);
  const LossAndGradients none = run(x, weight, [&](const Tensor& a, const Tensor& w) {
    CrossEntropyOptions sum_options;
    sum_options.reduction = Reduction::Sum;
    return linear_cross_entropy(a, w, ignored, sum_options, 4);
  });
  CHECK(none.loss.item<double>() == 0.0);
  CHECK(max_abs(none.grad_x) == 0.0);
  CHECK(max_abs(none.grad_weight) == 0.0);
  // The mean over no targets is 0 / 0, as cross_entropy gives.
  CHECK(std::isnan(linear_cross_entropy(x, weight, ignored).item<double>()));
}

TEST_CASE("linear_cross_entropy under bf16 autocast matches the composition under autocast") {
  manual_seed(7);
  const Tensor x = randn({8, 16}), weight = mul(randn({30, 16}), 0.3);
  const Tensor targets = randint(0, 30, {8});
  LossAndGradients expected, actual;
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    expected = run(x, weight, [&](const Tensor& a, const Tensor& w) { return composed(a, w, targets, {}); });
    actual = run(x, weight, [&](const Tensor& a, const Tensor& w) { return linear_cross_entropy(a, w, targets, {}, 3); });
  }
  CHECK(actual.loss.dtype() == kFloat32);
  CHECK(actual.grad_x.dtype() == kFloat32);
  check_close(actual.loss, expected.loss, 1e-6, 1e-6);
  // Each chunk's products round to bf16 as the whole product's do; the gradients agree to bf16.
  check_close(actual.grad_x, expected.grad_x, 2e-3, 1e-2);
  check_close(actual.grad_weight, expected.grad_weight, 2e-3, 1e-2);

  // In one chunk, the same sums in the same order: the same bits, though the chunk's logits stay
  // in bf16 (the loss kernels widen them) where the composition casts them to float32.
  LossAndGradients whole;
  {
    AutocastGuard autocast(DeviceType::CPU, kBFloat16);
    whole = run(x, weight, [&](const Tensor& a, const Tensor& w) { return linear_cross_entropy(a, w, targets, {}, 8); });
  }
  CHECK(whole.loss.item<float>() == expected.loss.item<float>());
  check_close(whole.grad_x, expected.grad_x, 0, 0);
  check_close(whole.grad_weight, expected.grad_weight, 0, 0);
}

TEST_CASE("linear_cross_entropy errors name the op and the shapes") {
  const Tensor x = randn({4, 3}), weight = randn({5, 3});
  CHECK_THROWS_WITH_ALL(linear_cross_entropy(x, randn({5, 2}), randint(0, 5, {4})), "linear_cross_entropy", "[4, 3]",
                        "[5, 2]");
  CHECK_THROWS_WITH_ALL(linear_cross_entropy(x, weight, randint(0, 5, {3})), "linear_cross_entropy", "[4]", "[3]");
  CHECK_THROWS_WITH_ALL(linear_cross_entropy(x, weight, tensor<int64_t>({0, 5, 1, 2}, {4})), "linear_cross_entropy",
                        "target 5", "5 classes");
  CHECK_THROWS_WITH_ALL(linear_cross_entropy(x, weight, randint(0, 5, {4}), {}, -1), "chunk_rows");
  CHECK_THROWS_WITH_ALL(linear_cross_entropy(x, weight.to(kFloat64), randint(0, 5, {4})), "linear_cross_entropy",
                        "float32", "float64");
  CHECK_THROWS_WITH_ALL(linear_cross_entropy(x, weight, randint(0, 5, {4}).to(kFloat32)), "int64");
}
