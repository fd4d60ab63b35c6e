// The guide's checks, shared by its tutorials: a shape, a parameter count, or two outputs
// compared, each printed with "ok" or "MISMATCH"; a mismatch is counted, and main() fails on any.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ember.h"

namespace ember::from_pytorch_tutorials {

inline int failed_checks = 0;

inline std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) text += ',';
    text += digits[i];
  }
  return text;
}

inline void heading(const std::string& source, const std::string& title) { fmt::print("\n[{}] {}\n", source, title); }

inline void check_shape(const std::string& what, const Tensor& t, const Shape& expected) {
  const bool ok = t.sizes() == expected;
  fmt::print("  {} {} (expected {}) {}\n", what, shape_str(t.sizes()), shape_str(expected), ok ? "ok" : "MISMATCH");
  if (!ok) ++failed_checks;
}

inline void check_parameters(const std::string& what, const nn::Module& module, int64_t expected) {
  const int64_t count = module.num_parameters();
  const bool ok = count == expected;
  fmt::print("  {}: {} parameters (expected {}) {}\n", what, grouped(count), grouped(expected),
             ok ? "ok" : "MISMATCH");
  if (!ok) ++failed_checks;
}

// Float32 arithmetic done in a different order differs in the last bits; `tolerance` bounds
// the largest elementwise difference.
inline void check_same(const std::string& what, const Tensor& a, const Tensor& b, double tolerance = 1e-4) {
  const bool same_shape = a.sizes() == b.sizes();
  const double difference = same_shape ? max(abs(sub(a, b))).item() : INFINITY;
  const bool ok = difference <= tolerance;
  fmt::print("  {}: max difference {:.2g} {}\n", what, difference, ok ? "ok" : "MISMATCH");
  if (!ok) ++failed_checks;
}

// A hand-built module's state dict under the built-in module's names: each rule replaces the
// first occurrence of its left side in a key. Loading the result with strict checking also
// proves the mapping complete: a name left over or missing throws, naming it.
inline nn::StateDict renamed(const nn::StateDict& state, const std::vector<std::pair<std::string, std::string>>& rules) {
  nn::StateDict result;
  for (const auto& [key, value] : state) {
    std::string name = key;
    for (const auto& [from, to] : rules) {
      const size_t at = name.find(from);
      if (at != std::string::npos) name.replace(at, from.size(), to);
    }
    result[name] = value;
  }
  return result;
}

}  // namespace ember::from_pytorch_tutorials
