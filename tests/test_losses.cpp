// nn losses: forward values against hand formulas, gradchecks in float64, and errors.
#include <cmath>

#include "helpers.h"
#include "nn/modules/losses.h"

using namespace ember;
using namespace ember::testing;

namespace {

const Reduction kReductions[] = {Reduction::None, Reduction::Mean, Reduction::Sum};

double sigmoid_of(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

TEST_CASE("cross_entropy forwards to the core op with its options") {
  const Tensor logits = randn({3, 4}, kFloat64);
  const Tensor targets = tensor<int64_t>({2, -100, 0}, {3});
  const std::vector<double> x = logits.to_vector<double>();
  // Hand formula: logsumexp(row) - row[target], averaged over the two counted rows.
  auto row_loss = [&](int row, int target) {
    double total = 0;
    for (int c = 0; c < 4; ++c) total += std::exp(x[row * 4 + c]);
    return std::log(total) - x[row * 4 + target];
  };
  const double expected = (row_loss(0, 2) + row_loss(2, 0)) / 2;
  CHECK(nn::cross_entropy(logits, targets).item() == doctest::Approx(expected).epsilon(1e-12));

  const CrossEntropyOptions options{.ignore_index = -100, .label_smoothing = 0.2, .reduction = Reduction::Sum};
  check_close(nn::cross_entropy(logits, targets, options), ember::cross_entropy(logits, targets, options), 0, 0);
}

TEST_CASE("nll_loss picks -log_probs at the targets, skipping ignore_index") {
  const Tensor log_probs = log_softmax(randn({3, 4}, kFloat64), -1);
  const Tensor targets = tensor<int64_t>({1, -100, 3}, {3});
  const double picked0 = log_probs.at<double>(0, 1), picked2 = log_probs.at<double>(2, 3);

  check_close(nn::nll_loss(log_probs, targets, -100, Reduction::None), tensor<double>({-picked0, 0.0, -picked2}, {3}),
              1e-15, 0);
  CHECK(nn::nll_loss(log_probs, targets, -100, Reduction::Sum).item() == doctest::Approx(-picked0 - picked2));
  CHECK(nn::nll_loss(log_probs, targets).item() == doctest::Approx((-picked0 - picked2) / 2));
  // Another ignore_index: -100 is then out of range, so use a real class.
  CHECK(nn::nll_loss(log_probs, tensor<int64_t>({1, 2, 3}, {3}), /*ignore_index=*/2).item() ==
        doctest::Approx((-picked0 - picked2) / 2));
  // Every target ignored: 0 / 0, as in PyTorch.
  CHECK(std::isnan(nn::nll_loss(log_probs, full({3}, -100, kInt64)).item()));
}

TEST_CASE("nll_loss of log_softmax equals cross_entropy, for sequences too") {
  const Tensor logits = randn({2, 3, 5}, kFloat64);
  const Tensor targets = tensor<int64_t>({0, 4, -100, 2, 2, 1}, {2, 3});
  for (Reduction reduction : kReductions) {
    check_close(nn::nll_loss(log_softmax(logits, -1), targets, -100, reduction),
                ember::cross_entropy(logits, targets, {.reduction = reduction}), 1e-12, 1e-12);
  }
  // A single row: log_probs [C] and a 0-d target.
  const Tensor row = log_softmax(randn({4}, kFloat64), -1);
  CHECK(nn::nll_loss(row, scalar_tensor(3, kInt64)).item() == doctest::Approx(-row.at<double>(3)));
}

TEST_CASE("nll_loss gradcheck: every reduction, ignored targets, non-contiguous input") {
  const Tensor targets = tensor<int64_t>({1, -100, 3}, {3});
  for (Reduction reduction : kReductions) {
    CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return nn::nll_loss(in[0], targets, -100, reduction); },
                    {leaf({3, 4})});
  }
  const Tensor transposed = as_leaf(randn({4, 3}, kFloat64).t());
  REQUIRE_FALSE(transposed.is_contiguous());
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return nn::nll_loss(in[0], targets); }, {transposed});
  const Tensor sequence_targets = tensor<int64_t>({0, 2, -100, 1}, {2, 2});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return nn::nll_loss(log_softmax(in[0], -1), sequence_targets); },
                  {leaf({2, 2, 3})});
}

TEST_CASE("mse_loss is the squared difference, reduced") {
  const Tensor input = tensor<double>({1.0, -2.0, 0.5, 3.0}, {2, 2});
  const Tensor target = tensor<double>({0.0, 1.0, 0.5, 1.0}, {2, 2});
  check_close(nn::mse_loss(input, target, Reduction::None), tensor<double>({1.0, 9.0, 0.0, 4.0}, {2, 2}), 0, 0);
  CHECK(nn::mse_loss(input, target, Reduction::Sum).item() == 14.0);
  CHECK(nn::mse_loss(input, target).item() == 3.5);
  for (Reduction reduction : kReductions) {
    CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return nn::mse_loss(in[0], in[1], reduction); },
                    {leaf({2, 3}), leaf({2, 3})});
  }
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return nn::mse_loss(in[0], in[1]); },
                  {as_leaf(randn({3, 2}, kFloat64).t()), leaf({2, 3})});
}

TEST_CASE("binary_cross_entropy_with_logits matches -[y log s + (1 - y) log(1 - s)]") {
  const std::vector<double> x = {0.3, -1.2, 2.0, -0.1, 0.8, -2.5};
  const std::vector<double> y = {1.0, 0.0, 0.25, 1.0, 0.0, 0.6};
  const std::vector<double> pos_weight = {2.0, 0.5, 3.0};  // per class, classes last
  const Tensor logits = tensor<double>(x, {2, 3});
  const Tensor targets = tensor<double>(y, {2, 3});
  std::vector<double> plain(6), weighted(6);
  for (size_t i = 0; i < 6; ++i) {
    const double s = sigmoid_of(x[i]);
    plain[i] = -(y[i] * std::log(s) + (1 - y[i]) * std::log(1 - s));
    weighted[i] = -(pos_weight[i % 3] * y[i] * std::log(s) + (1 - y[i]) * std::log(1 - s));
  }
  check_close(nn::binary_cross_entropy_with_logits(logits, targets, Reduction::None), tensor<double>(plain, {2, 3}),
              1e-14, 1e-12);
  double total = 0;
  for (double v : plain) total += v;
  CHECK(nn::binary_cross_entropy_with_logits(logits, targets).item() == doctest::Approx(total / 6).epsilon(1e-12));
  CHECK(nn::binary_cross_entropy_with_logits(logits, targets, Reduction::Sum).item() ==
        doctest::Approx(total).epsilon(1e-12));
  check_close(nn::binary_cross_entropy_with_logits(logits, targets, Reduction::None, tensor<double>(pos_weight, {3})),
              tensor<double>(weighted, {2, 3}), 1e-14, 1e-12);
}

TEST_CASE("binary_cross_entropy_with_logits stays finite for large logits") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor logits = tensor<double>({100.0, -100.0, 30.0, -30.0}, {4}, dtype);
    const Tensor targets = tensor<double>({0.0, 1.0, 1.0, 0.0}, {4}, dtype);
    // Confidently wrong costs |x|; confidently right costs log(1 + exp(-|x|)).
    check_close(nn::binary_cross_entropy_with_logits(logits, targets, Reduction::None),
                tensor<double>({100.0, 100.0, std::log1p(std::exp(-30.0)), std::log1p(std::exp(-30.0))}, {4}, dtype),
                1e-12, 1e-6);
  }
}

TEST_CASE("binary_cross_entropy_with_logits gradcheck: logits, targets and a broadcast pos_weight") {
  const Tensor targets = as_leaf(rand({2, 3}, kFloat64));
  for (Reduction reduction : kReductions) {
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) { return nn::binary_cross_entropy_with_logits(in[0], in[1], reduction); },
        {leaf({2, 3}), targets});
  }
  const Tensor pos_weight = as_leaf(add(rand({3}, kFloat64), 0.5));
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        return nn::binary_cross_entropy_with_logits(in[0], in[1], Reduction::Mean, in[2]);
      },
      {as_leaf(randn({3, 2}, kFloat64).t()), targets, pos_weight});
}

TEST_CASE("loss errors name shapes and dtypes") {
  const Tensor log_probs = randn({3, 4});
  CHECK_THROWS_WITH_ALL(nn::nll_loss(log_probs, zeros({3}, kInt64).to(kFloat32)), "nll_loss",
                        "targets must be int64", "float32");
  CHECK_THROWS_WITH_ALL(nn::nll_loss(log_probs, zeros({4}, kInt64)), "nll_loss", "[3, 4]", "targets of shape [3]",
                        "got targets of shape [4]");
  CHECK_THROWS_WITH_ALL(nn::nll_loss(log_probs, tensor<int64_t>({0, 4, 1}, {3})), "nll_loss", "target 4",
                        "flat position 1", "4 classes");
  CHECK_THROWS_WITH_ALL(nn::nll_loss(zeros({3, 4}, kInt64), zeros({3}, kInt64)), "nll_loss",
                        "must be floating point", "int64");
  CHECK_THROWS_WITH_ALL(nn::mse_loss(randn({2, 3}), randn({3, 2})), "mse_loss", "input of shape [2, 3]",
                        "target of shape [3, 2]");
  CHECK_THROWS_WITH_ALL(nn::mse_loss(randn({2}), randn({2}, kFloat64)), "mse_loss", "float32", "float64");
  CHECK_THROWS_WITH_ALL(nn::binary_cross_entropy_with_logits(randn({2, 3}), rand({2, 1})),
                        "binary_cross_entropy_with_logits", "[2, 3]", "[2, 1]");
  CHECK_THROWS_WITH_ALL(nn::binary_cross_entropy_with_logits(randn({2, 3}), rand({2, 3}), Reduction::Mean, ones({2})),
                        "binary_cross_entropy_with_logits", "pos_weight of shape [2]", "[2, 3]");
  CHECK_THROWS_WITH_ALL(
      nn::binary_cross_entropy_with_logits(randn({2, 3}), rand({2, 3}), Reduction::Mean, ones({3}, kFloat64)),
      "pos_weight has dtype float64", "float32");
}
