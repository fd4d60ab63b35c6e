// Unary elementwise ops: values against std:: references in float32 and float64, integer and
// bool handling, errors, and gradients away from kinks and domain edges.
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  double (*reference)(double);
  bool positive_domain;  // log, sqrt and rsqrt take positive inputs
};

double gelu_reference(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }
double gelu_tanh_reference(double x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double v) { return -v; }, false},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double v) { return std::abs(v); }, false},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double v) { return std::exp(v); }, false},
      {"log", [](const Tensor& x) { return log(x); }, [](double v) { return std::log(v); }, true},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, true},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double v) { return 1.0 / std::sqrt(v); }, true},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double v) { return std::sin(v); }, false},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double v) { return std::cos(v); }, false},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, false},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double v) { return 1.0 / (1.0 + std::exp(-v)); },
       false},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0.0; }, false},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double v) { return std::erf(v); }, false},
      {"gelu", [](const Tensor& x) { return gelu(x); }, gelu_reference, false},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); }, gelu_tanh_reference, false},
  };
  return cases;
}

// The op's reference applied to every element, in float64, then stored as `dtype`.
Tensor reference_of(const Tensor& x, double (*f)(double)) {
  std::vector<double> values = x.to_vector<double>();
  for (double& v : values) v = f(v);
  return tensor(values, x.sizes());
}

// Random inputs for an op: normal with a wide spread, or positive for positive domains.
Tensor inputs_for(const UnaryCase& c, const Shape& shape, DType dtype) {
  return c.positive_domain ? add(mul(rand(shape, dtype), 5.0), 0.05) : mul(randn(shape, dtype), 3.0);
}

// A float64 leaf of normal values kept at least `gap` away from each of `points` (kinks,
// clamp bounds), so central differences never straddle one.
Tensor leaf_away_from(const Shape& shape, std::vector<double> points, double gap = 0.1) {
  std::vector<double> values = randn(shape, kFloat64).to_vector<double>();
  for (double& v : values) {
    for (double point : points) {
      if (std::abs(v - point) < gap) v = point + (v < point ? -gap : gap);
    }
  }
  return tensor(values, shape).requires_grad_();
}

}  // namespace

TEST_CASE("every unary op matches its std:: reference in float64 and float32") {
  for (const UnaryCase& c : unary_cases()) {
    for (DType dtype : {kFloat64, kFloat32}) {
      INFO(std::string(c.name) << " " << dtype_name(dtype));
      const Tensor x = inputs_for(c, {1000}, dtype);
      const Tensor y = c.op(x);
      CHECK(y.dtype() == dtype);
      CHECK(y.sizes() == x.sizes());
      if (dtype == kFloat64) check_close(y, reference_of(x, c.reference), 1e-12, 1e-12);
      else check_close(y, reference_of(x, c.reference), 1e-6, 1e-5);
      // A non-contiguous input gives the same values as its contiguous copy.
      const Tensor strided = inputs_for(c, {6, 5}, dtype).t().slice(0, 0, 5, 2);
      check_close(c.op(strided), c.op(strided.contiguous()), 0, 0);
    }
  }
}

TEST_CASE("unary ops at special values") {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = tensor({0.0f, -0.0f, inf, -inf});
  check_close(exp(x), tensor({1.0f, 1.0f, inf, 0.0f}));
  check_close(tanh(x), tensor({0.0f, 0.0f, 1.0f, -1.0f}));
  check_close(sigmoid(x), tensor({0.5f, 0.5f, 1.0f, 0.0f}));
  check_close(erf(x), tensor({0.0f, 0.0f, 1.0f, -1.0f}));
  check_close(relu(x), tensor({0.0f, 0.0f, inf, 0.0f}));
  check_close(sigmoid(tensor({-100.0f, 100.0f})), tensor({0.0f, 1.0f}));
  check_close(gelu(tensor({-20.0f, 20.0f})), tensor({0.0f, 20.0f}));
  check_close(log(tensor({0.0f, 1.0f})), tensor({-inf, 0.0f}));
  CHECK(std::isnan(log(tensor({-1.0f})).item<float>()));
  CHECK(std::isnan(sqrt(tensor({-1.0f})).item<float>()));
}

TEST_CASE("neg, abs, relu and clamp take int64; math functions do not") {
  const Tensor i = tensor<int64_t>({-3, 0, 5}, {3});
  CHECK(neg(i).to_vector<int64_t>() == std::vector<int64_t>{3, 0, -5});
  CHECK(abs(i).to_vector<int64_t>() == std::vector<int64_t>{3, 0, 5});
  CHECK(relu(i).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 5});
  CHECK(clamp(i, -1, 2).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 2});
  CHECK(neg(i).dtype() == kInt64);
  for (auto op : {exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, erf}) {
    CHECK_THROWS_WITH_ALL(op(i), "expected a floating point tensor", "int64");
  }
  CHECK_THROWS_WITH_ALL(exp(i), "exp:", "int64");
  CHECK_THROWS_WITH_ALL(log(i), "log:", "int64");
  CHECK_THROWS_WITH_ALL(gelu(i), "gelu:", "int64");
  CHECK_THROWS_WITH_ALL(neg(tensor({true})), "neg:", "bool");
  CHECK_THROWS_WITH_ALL(exp(Tensor()), "exp:", "undefined");
}

TEST_CASE("clamp with min, max or both") {
  const Tensor x = tensor({-2.0, -0.5, 0.0, 0.5, 2.0}, {5});
  check_close(clamp(x, -1.0, 1.0), tensor({-1.0, -0.5, 0.0, 0.5, 1.0}, {5}));
  check_close(clamp(x, 0.0, std::nullopt), tensor({0.0, 0.0, 0.0, 0.5, 2.0}, {5}));
  check_close(clamp(x, std::nullopt, 0.25), tensor({-2.0, -0.5, 0.0, 0.25, 0.25}, {5}));
  check_close(clamp(x, std::nullopt, std::nullopt), x);
  check_close(clamp(x.slice(0, 0, 5, 2), 0.0, 1.0), tensor({0.0, 0.0, 1.0}, {3}));
  check_close(clamp(tensor({0.3f, 7.0f}), 0.5, 0.5), tensor({0.5f, 0.5f}));
  CHECK_THROWS_WITH_ALL(clamp(x, 1.0, -1.0), "clamp", "min 1", "max -1");
  CHECK_THROWS_WITH_ALL(clamp(tensor({true}), 0.0, 1.0), "clamp", "bool");
}

TEST_CASE("isfinite and isnan give bool tensors for every dtype") {
  const Tensor x = tensor({1.0f, NAN, INFINITY, -INFINITY});
  CHECK(isfinite(x).dtype() == kBool);
  CHECK(isfinite(x).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(isnan(x).to_vector<bool>() == std::vector<bool>{false, true, false, false});
  CHECK(isnan(x.to(kFloat64)).to_vector<bool>() == std::vector<bool>{false, true, false, false});
  CHECK(isfinite(tensor({1, 2})).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(isnan(tensor({1, 2})).to_vector<bool>() == std::vector<bool>{false, false});
  CHECK(isfinite(tensor({true})).to_vector<bool>() == std::vector<bool>{true});
  CHECK_FALSE(isnan(ones({2}, TensorOptions(kFloat64).requires_grad(true))).requires_grad());
}

TEST_CASE("gradients of every differentiable unary op") {
  using Inputs = const std::vector<Tensor>&;
  for (const UnaryCase& c : unary_cases()) {
    INFO(std::string(c.name));
    const bool has_kink_at_zero = std::string(c.name) == "abs" || std::string(c.name) == "relu";
    Tensor x = c.positive_domain ? add(mul(rand({2, 3}, kFloat64), 2.0), 0.5).detach().requires_grad_()
               : has_kink_at_zero ? leaf_away_from({2, 3}, {0.0})
                                  : leaf({2, 3});
    auto op = c.op;
    CHECK_GRADCHECK([op](Inputs in) { return op(in[0]); }, {x});
    // A non-contiguous leaf.
    CHECK_GRADCHECK([op](Inputs in) { return op(in[0]); }, {as_leaf(x.detach().t())});
  }
  CHECK_GRADCHECK([](Inputs in) { return clamp(in[0], -0.5, 0.5); }, {leaf_away_from({3, 4}, {-0.5, 0.5})});
  CHECK_GRADCHECK([](Inputs in) { return clamp(in[0], 0.2, std::nullopt); }, {leaf_away_from({3, 4}, {0.2})});
  CHECK_GRADCHECK([](Inputs in) { return clamp(in[0].t(), std::nullopt, -0.3); }, {leaf_away_from({3, 4}, {-0.3})});
}

TEST_CASE("the fused backward of relu and gelu in float32 matches float64's, strided inputs included") {
  for (const UnaryCase& c : unary_cases()) {
    const std::string name = c.name;
    if (name != "relu" && name != "gelu" && name != "gelu tanh") continue;
    INFO(name);
    // A strided view of a float64 leaf, and the same values in float32.
    const Tensor base = mul(randn({64, 48}, kFloat64), 3.0);
    const Tensor x64 = base.t().slice(0, 0, 48, 2).detach().requires_grad_();
    const Tensor x32 = x64.detach().to(kFloat32).requires_grad_();
    const Tensor grad = randn(x64.sizes(), kFloat64);
    c.op(x64).backward(grad);
    c.op(x32).backward(grad.to(kFloat32));
    check_close(x32.grad(), x64.grad(), 1e-5, 1e-5);
  }
}
