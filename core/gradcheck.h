// gradcheck: compares the gradients backward() computes with central finite differences, in
// float64, for every input that requires grad. gradgradcheck does the same one order up: it
// checks the derivatives of the gradients themselves (what create_graph records).
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
  std::string worst_output_meaning;  // gradgradcheck: which gradient's element worst_output is
};

struct GradcheckReport {
  std::string check = "gradcheck";  // or "gradgradcheck"
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

// Checks second derivatives, as PyTorch's gradgradcheck: runs gradcheck on the function
//   (inputs..., v) -> the gradients of <fn(inputs), v> with respect to the inputs that require
//   grad (autograd::grad with create_graph), flattened and joined,
// so the backward of the backward is compared with finite differences of the backward, for
// both the inputs and the output gradient v. `grad_output` is v (float64, fn's output shape);
// undefined picks a fixed one with distinct entries. Input k of the report is input k of fn;
// the last one is v. A gradient an input does not get counts as zero.
GradcheckReport gradgradcheck(const GradcheckFunction& fn, const std::vector<Tensor>& inputs,
                              const Tensor& grad_output = Tensor(), const GradcheckOptions& options = {});

}  // namespace ember
