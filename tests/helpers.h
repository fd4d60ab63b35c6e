// Shared helpers for ember's test suites.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ember.h"

namespace ember::testing {

// A float64 leaf of random normal values that requires grad: the usual gradcheck input.
inline Tensor leaf(const Shape& shape, double scale = 1.0) {
  Tensor x = mul(randn(shape, kFloat64), scale).detach();
  x.requires_grad_(true);
  return x;
}

// Marks an existing tensor as a gradcheck leaf.
inline Tensor as_leaf(const Tensor& t) {
  Tensor x = t.detach();
  x.requires_grad_(true);
  return x;
}

// Checks that two tensors have the same shape and close values, reporting the first mismatch.
inline void check_close(const Tensor& actual, const Tensor& expected, double atol = 1e-6, double rtol = 1e-5) {
  REQUIRE(actual.defined());
  REQUIRE(expected.defined());
  REQUIRE_MESSAGE(actual.sizes() == expected.sizes(),
                  "shape " << shape_str(actual.sizes()) << " != " << shape_str(expected.sizes()));
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    const bool same_inf = std::isinf(a[i]) && a[i] == e[i];
    if (both_nan || same_inf) continue;
    if (!(std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]))) {
      FAIL("element " << i << ": " << a[i] << " != " << e[i]);
    }
  }
}

// The largest absolute value in a tensor.
inline double max_abs(const Tensor& t) {
  double worst = 0;
  for (double v : t.to_vector<double>()) worst = std::max(worst, std::abs(v));
  return worst;
}

// A module's parameter names in registration order.
inline std::vector<std::string> parameter_names(const nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : module.named_parameters()) names.push_back(name);
  return names;
}

// Checks a gradcheck report and prints its summary when it fails.
#define CHECK_GRADCHECK(fn, inputs, ...)                                                   \
  do {                                                                                     \
    const ::ember::GradcheckReport report_ = ::ember::gradcheck(fn, inputs, ##__VA_ARGS__); \
    CHECK_MESSAGE(report_.passed, report_.summary());                                      \
  } while (0)

// Checks that `expression` throws ember::Error whose message contains every given fragment.
#define CHECK_THROWS_WITH_ALL(expression, ...)                                               \
  do {                                                                                       \
    bool thrown_ = false;                                                                    \
    try {                                                                                    \
      (void)(expression);                                                                    \
    } catch (const ::ember::Error& error_) {                                                 \
      thrown_ = true;                                                                        \
      const std::string message_ = error_.what();                                            \
      for (const char* fragment_ : {__VA_ARGS__}) {                                          \
        CHECK_MESSAGE(message_.find(fragment_) != std::string::npos,                         \
                      "message \"" << message_ << "\" lacks \"" << std::string(fragment_) << "\"");       \
      }                                                                                      \
    }                                                                                        \
    CHECK_MESSAGE(thrown_, "expected ember::Error from " #expression);                       \
  } while (0)

}  // namespace ember::testing
