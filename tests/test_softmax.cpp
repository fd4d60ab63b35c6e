// softmax and log_softmax: values against a naive loop along any dim, stability for huge and
// -inf logits, gradcheck, errors.
#include <limits>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// softmax (or log_softmax) along `dim` computed naively in double from the row-major values.
Tensor reference_softmax(const Tensor& x, int64_t dim, bool log) {
  const std::vector<double> values = x.to_vector<double>();
  const Shape& sizes = x.sizes();
  int64_t outer = 1, n = sizes[dim], inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= sizes[d];
  std::vector<double> out(values.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t r) { return (o * n + r) * inner + i; };
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t r = 0; r < n; ++r) max = std::max(max, values[at(r)]);
      double sum = 0;
      for (int64_t r = 0; r < n; ++r) sum += std::exp(values[at(r)] - max);
      for (int64_t r = 0; r < n; ++r) {
        out[at(r)] = log ? values[at(r)] - max - std::log(sum) : std::exp(values[at(r)] - max) / sum;
      }
    }
  }
  return tensor(out, sizes, kFloat64);
}

const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("softmax and log_softmax match a naive loop along every dim, float32 and float64") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tolerance = dtype == kFloat32 ? 1e-6 : 1e-12;
    for (const Shape& shape : {Shape{7}, Shape{4, 9}, Shape{3, 5, 6}, Shape{2, 3, 300}, Shape{2, 1030}}) {
      const Tensor x = mul(randn(shape, dtype), 3.0);
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        INFO(dtype_name(dtype));
        CAPTURE(dim);
        check_close(softmax(x, dim), reference_softmax(x, dim, false), tolerance, 1e-5);
        check_close(log_softmax(x, dim), reference_softmax(x, dim, true), 10 * tolerance, 1e-5);
      }
    }
  }
}

TEST_CASE("softmax of non-contiguous inputs and negative dims") {
  const Tensor base = randn({6, 5}, kFloat64);
  const Tensor x = base.t();  // [5, 6], strided
  check_close(softmax(x, -1), reference_softmax(x.contiguous(), 1, false), 1e-12);
  check_close(log_softmax(x, 0), reference_softmax(x.contiguous(), 0, true), 1e-12);
  const Tensor sliced = randn({4, 10}, kFloat32).slice(1, 0, 10, 2);
  check_close(softmax(sliced, 1), reference_softmax(sliced.contiguous(), 1, false), 1e-6);
  CHECK(softmax(x, -1).is_contiguous());
}

TEST_CASE("softmax is stable for logits of 1e4 and rows with -inf") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor big = tensor({1e4, 1e4 - 1.0, 1e4 - 2.0, -1e4}, {1, 4}, dtype);
    const std::vector<double> p = softmax(big, 1).to_vector<double>();
    const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
    CHECK(p[0] == doctest::Approx(1 / z).epsilon(1e-6));
    CHECK(p[1] == doctest::Approx(std::exp(-1.0) / z).epsilon(1e-6));
    CHECK(p[3] == 0.0);
    const std::vector<double> logp = log_softmax(big, 1).to_vector<double>();
    CHECK(logp[0] == doctest::Approx(-std::log(z)).epsilon(1e-6));
    CHECK(std::isfinite(logp[3]));

    // Row 0: some -inf (exact zeros there); row 1: all -inf (NaN, as in PyTorch).
    const Tensor masked = tensor({0.5, -kInf, 1.5, -kInf, -kInf, -kInf, -kInf, -kInf}, {2, 4}, dtype);
    const std::vector<double> q = softmax(masked, 1).to_vector<double>();
    CHECK(q[1] == 0.0);
    CHECK(q[3] == 0.0);
    CHECK(q[0] == doctest::Approx(1 / (1 + std::exp(1.0))).epsilon(1e-6));
    CHECK(q[0] + q[2] == doctest::Approx(1.0).epsilon(1e-6));
    for (int i = 4; i < 8; ++i) CHECK(std::isnan(q[i]));
    const std::vector<double> logq = log_softmax(masked, 1).to_vector<double>();
    CHECK(logq[1] == -kInf);
    CHECK(std::isnan(logq[5]));
    // The same along a non-last dim.
    const std::vector<double> qt = softmax(masked.t(), 0).to_vector<double>();
    CHECK(qt[2] == 0.0);  // element (1, 0) of the transpose is masked[0][1]
    CHECK(std::isnan(qt[1]));
  }
}

TEST_CASE("softmax and log_softmax pass gradcheck along last and inner dims, on strided inputs") {
  for (bool log : {false, true}) {
    auto op = [log](const Tensor& x, int64_t dim) { return log ? log_softmax(x, dim) : softmax(x, dim); };
    CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return op(in[0], -1); }, std::vector<Tensor>{leaf({3, 5})});
    CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return op(in[0], 1); }, std::vector<Tensor>{leaf({2, 3, 4})});
    CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return op(in[0], 0); }, std::vector<Tensor>{leaf({4, 3})});
    CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return op(in[0], 1); },
                    std::vector<Tensor>{as_leaf(randn({5, 3}, kFloat64).t())});
    CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return op(in[0].transpose(0, 1), -1); },
                    std::vector<Tensor>{leaf({4, 3})});
  }
}

TEST_CASE("softmax saves its output and records one node") {
  const Tensor x = leaf({2, 3});
  const Tensor y = softmax(x, 1);
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name() == "SoftmaxBackward");
  CHECK(log_softmax(x, 1).grad_fn()->name() == "LogSoftmaxBackward");
  // Backward through a float32 softmax agrees with the float64 one.
  const Tensor x32 = x.detach().to(kFloat32).requires_grad_();
  const Tensor weights = randn({2, 3}, kFloat64);
  sum(mul(softmax(x32, 1), weights.to(kFloat32))).backward();
  sum(mul(softmax(x, 1), weights)).backward();
  check_close(x32.grad(), x.grad(), 1e-6, 1e-4);
}

TEST_CASE("softmax errors") {
  CHECK_THROWS_WITH_ALL(softmax(ones({2, 3}, kInt64), 1), "softmax", "floating point", "int64", "[2, 3]");
  CHECK_THROWS_WITH_ALL(log_softmax(ones({2, 3}, kInt64), 1), "log_softmax", "int64");
  CHECK_THROWS_WITH_ALL(softmax(ones({2, 3}), 2), "softmax", "2");
  CHECK_THROWS_WITH_ALL(softmax(Tensor(), 0), "softmax", "undefined");
}
