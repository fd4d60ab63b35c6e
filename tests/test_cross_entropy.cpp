// cross_entropy: losses against a naive loop (every reduction, ignore_index, label
// smoothing), stability, gradcheck, errors.
#include <limits>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Per-row losses in double, PyTorch's definition: (1 - eps) * nll + eps * mean_c(-log p_c);
// ignored rows give 0.
std::vector<double> reference_losses(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double eps) {
  const int64_t classes = logits.size(-1);
  const std::vector<double> x = logits.contiguous().to_vector<double>();
  const std::vector<int64_t> t = targets.contiguous().to_vector<int64_t>();
  std::vector<double> losses(t.size(), 0.0);
  for (size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore_index) continue;
    double max = -std::numeric_limits<double>::infinity(), sum = 0, mean_neg_log_p = 0;
    for (int64_t c = 0; c < classes; ++c) max = std::max(max, x[r * classes + c]);
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(x[r * classes + c] - max);
    const double lse = max + std::log(sum);
    for (int64_t c = 0; c < classes; ++c) mean_neg_log_p += (lse - x[r * classes + c]) / classes;
    losses[r] = (1 - eps) * (lse - x[r * classes + t[r]]) + eps * mean_neg_log_p;
  }
  return losses;
}

}  // namespace

TEST_CASE("cross_entropy matches a naive loop for every reduction, ignore_index and label smoothing") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = dtype == kFloat32 ? 1e-5 : 1e-12;
    const Tensor logits = mul(randn({2, 3, 7}, dtype), 2.0);
    const Tensor targets = tensor<int64_t>({0, 6, -100, 3, 3, 1}, {2, 3});
    for (double eps : {0.0, 0.1}) {
      CrossEntropyOptions options;
      options.label_smoothing = eps;
      const std::vector<double> expected = reference_losses(logits, targets, -100, eps);
      double total = 0;
      for (double v : expected) total += v;
      options.reduction = Reduction::None;
      check_close(cross_entropy(logits, targets, options), tensor(expected, {2, 3}, kFloat64), tolerance, 1e-5);
      options.reduction = Reduction::Sum;
      check_close(cross_entropy(logits, targets, options), scalar_tensor(total, kFloat64), tolerance, 1e-5);
      options.reduction = Reduction::Mean;
      check_close(cross_entropy(logits, targets, options), scalar_tensor(total / 5, kFloat64), tolerance, 1e-5);
    }
    // Another ignore_index, and a strided [N, C] batch.
    const Tensor strided = randn({5, 4}, dtype).t();  // [4, 5]
    const Tensor t2 = tensor<int64_t>({4, 2, 0, 2}, {4});
    CrossEntropyOptions options;
    options.ignore_index = 2;
    options.reduction = Reduction::None;
    check_close(cross_entropy(strided, t2, options), tensor(reference_losses(strided, t2, 2, 0.0), {4}, kFloat64),
                tolerance, 1e-5);
  }
}

TEST_CASE("cross_entropy is stable for logits of 1e4 and handles all-ignored batches") {
  const Tensor logits = tensor({1e4, 0.0, -1e4, 1e4, 1e4 - 1.0, 1e4}, {2, 3});
  const Tensor targets = tensor<int64_t>({0, 1}, {2});
  CrossEntropyOptions none;
  none.reduction = Reduction::None;
  const std::vector<float> losses = cross_entropy(logits, targets, none).to_vector<float>();
  CHECK(losses[0] == doctest::Approx(0.0).epsilon(1e-6));
  CHECK(losses[1] == doctest::Approx(1 + std::log(2 + std::exp(-1.0))).epsilon(1e-3));  // float32 ulp at 1e4
  // Mean over no counted targets is NaN, as in PyTorch; sum is 0.
  const Tensor ignored = tensor<int64_t>({-100, -100}, {2});
  CHECK(std::isnan(cross_entropy(logits, ignored).item()));
  CrossEntropyOptions sum_options;
  sum_options.reduction = Reduction::Sum;
  CHECK(cross_entropy(logits, ignored, sum_options).item() == 0.0);
}

TEST_CASE("cross_entropy gradients over many rows and classes match a composed log_softmax") {
  const Tensor x0 = randn({300, 257}, kFloat64);
  const Tensor targets = randint(0, 257, {300});
  CrossEntropyOptions options;
  options.label_smoothing = 0.2;
  const Tensor x = x0.clone().requires_grad_();
  cross_entropy(x, targets, options).backward();
  // Reference: grad = (softmax - (1 - eps) onehot - eps / C) / N.
  const std::vector<double> p = softmax(x0, 1).to_vector<double>();
  const std::vector<int64_t> t = targets.to_vector<int64_t>();
  std::vector<double> expected(p.size());
  for (int64_t r = 0; r < 300; ++r) {
    for (int64_t c = 0; c < 257; ++c) {
      expected[r * 257 + c] = (p[r * 257 + c] - 0.2 / 257 - (c == t[r] ? 0.8 : 0.0)) / 300;
    }
  }
  check_close(x.grad(), tensor(expected, {300, 257}, kFloat64), 1e-12);
  // float32 agrees with float64.
  const Tensor x32 = x0.to(kFloat32).requires_grad_();
  cross_entropy(x32, targets, options).backward();
  check_close(x32.grad(), x.grad(), 1e-7, 1e-4);
}

TEST_CASE("cross_entropy passes gradcheck for each reduction, ignore_index and label smoothing") {
  const Tensor targets = tensor<int64_t>({1, -100, 3, 0}, {4});
  for (Reduction reduction : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
    for (double eps : {0.0, 0.3}) {
      CrossEntropyOptions options;
      options.reduction = reduction;
      options.label_smoothing = eps;
      CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets, options); },
                      std::vector<Tensor>{leaf({4, 5})});
    }
  }
  CrossEntropyOptions options;
  options.ignore_index = 0;
  const Tensor targets_3d = tensor<int64_t>({0, 2, 1, 2, 0, 1}, {2, 3});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets_3d, options); },
                  std::vector<Tensor>{leaf({2, 3, 3})});
  const Tensor targets_4 = tensor<int64_t>({1, 0, 3, 0}, {4});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return cross_entropy(in[0].t(), targets_4, options); },
                  std::vector<Tensor>{leaf({5, 4})});
}

TEST_CASE("cross_entropy errors") {
  const Tensor logits = randn({3, 4});
  CHECK_THROWS_WITH_ALL(cross_entropy(logits, tensor<int64_t>({0, 4, 1}, {3})), "cross_entropy", "target 4",
                        "4 classes");
  CHECK_THROWS_WITH_ALL(cross_entropy(logits, tensor<int64_t>({0, -3, 1}, {3})), "target -3", "4 classes");
  CHECK_THROWS_WITH_ALL(cross_entropy(logits, tensor({0.0f, 1.0f, 2.0f}, {3})), "cross_entropy", "int64", "float32");
  CHECK_THROWS_WITH_ALL(cross_entropy(ones({3, 4}, kInt64), tensor<int64_t>({0, 1, 2}, {3})), "logits",
                        "floating point", "int64");
  CHECK_THROWS_WITH_ALL(cross_entropy(logits, tensor<int64_t>({0, 1}, {2})), "cross_entropy", "[3, 4]", "[3]",
                        "[2]");
  CHECK_THROWS_WITH_ALL(cross_entropy(logits, tensor<int64_t>({0, 1, 2}, {1, 3})), "[3, 4]", "[1, 3]");
  CrossEntropyOptions options;
  options.label_smoothing = 1.5;
  CHECK_THROWS_WITH_ALL(cross_entropy(logits, tensor<int64_t>({0, 1, 2}, {3}), options), "label_smoothing", "1.5");
}
