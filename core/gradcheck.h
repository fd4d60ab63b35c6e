// gradcheck: compares the gradients backward() computes with central finite differences, in
// float64, for every input that requires grad.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember {

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step
  double atol = 1e-5;  // an element passes when |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-3;
};

// What gradcheck found for one input.
struct GradcheckInputReport {
  int64_t input = 0;
  bool requires_grad = false;
  bool passed = true;
  double max_abs_error = 0;  // worst |analytic - numeric| over the Jacobian
  double max_rel_error = 0;  // worst |analytic - numeric| / max(|numeric|, tiny)
  Shape worst_element;       // index into the input of the worst entry
  int64_t worst_output = 0;  // flat index into the output of the worst entry
  double analytic = 0, numeric = 0;  // the two values there
  std::string problem;       // set when something other than a value mismatch went wrong
};

struct GradcheckReport {
  bool passed = true;
  std::vector<GradcheckInputReport> inputs;
  // A readable account: one line per input, the worst element and both values on failure.
  std::string summary() const;
  explicit operator bool() const { return passed; }
};

using GradcheckFunction = std::function<Tensor(const std::vector<Tensor>&)>;

// Builds the Jacobian of fn at `inputs` twice: column by column with backward() (one pass per
// output element) and entry by entry with central differences (fn(x + eps) - fn(x - eps)) / 2eps.
// Inputs that require grad must be float64 and must not overlap in memory (pass a base tensor
// and expand inside fn). Inputs that do not require grad must end with no gradient.
GradcheckReport gradcheck(const GradcheckFunction& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace ember
