// Analytic versus numerical Jacobians.
#include "core/gradcheck.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/autograd/grad.h"
#include "core/autograd/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/join.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"

namespace ember {
namespace {

// A tensor whose elements alias one another (an expanded view) cannot be perturbed one
// element at a time.
bool has_overlap(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.strides()[d] == 0 && t.sizes()[d] > 1) return true;
  }
  return false;
}

// Offset in elements of element `flat` (row-major) of t, honouring its strides.
int64_t element_offset(const Tensor& t, int64_t flat) {
  int64_t offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (flat % t.sizes()[d]) * t.strides()[d];
    flat /= t.sizes()[d];
  }
  return offset;
}

Shape unravel(const Shape& shape, int64_t flat) {
  Shape index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

Tensor evaluate(const GradcheckFunction& fn, const std::vector<Tensor>& inputs) {
  Tensor out = fn(inputs);
  EMBER_CHECK(out.defined(), "gradcheck: fn returned an undefined tensor");
  EMBER_CHECK(out.dtype() == kFloat64, "gradcheck: fn must return a float64 tensor, got {}", out.dtype());
  return out;
}

}  // namespace

GradcheckReport gradcheck(const GradcheckFunction& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    EMBER_CHECK(input.defined(), "gradcheck: input {} is undefined", i);
    if (!input.requires_grad()) continue;
    EMBER_CHECK(input.dtype() == kFloat64, "gradcheck: input {} is {}; finite differences need float64", i,
                input.dtype());
    EMBER_CHECK(input.is_cpu(), "gradcheck: input {} is on {}; gradcheck runs on the CPU", i, input.device());
    EMBER_CHECK(input.is_leaf(), "gradcheck: input {} is not a leaf; pass leaves (make one with detach() and "
                "requires_grad_())", i);
    EMBER_CHECK(!has_overlap(input),
                "gradcheck: input {} (shape {}, strides {}) has elements that share memory; pass the base tensor "
                "and expand it inside fn",
                i, shape_str(input.sizes()), shape_str(input.strides()));
  }

  // Analytic Jacobian: column k of each input's Jacobian is that input's gradient when the
  // output's gradient is the k-th unit vector.
  const Tensor output = evaluate(fn, inputs).detach();
  const int64_t out_numel = output.numel();
  std::vector<std::vector<double>> analytic(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) analytic[i].assign(inputs[i].numel() * out_numel, 0.0);

  GradcheckReport report;
  report.inputs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    report.inputs[i].input = static_cast<int64_t>(i);
    report.inputs[i].requires_grad = inputs[i].requires_grad();
  }

  for (int64_t k = 0; k < out_numel; ++k) {
    for (const Tensor& input : inputs) const_cast<Tensor&>(input).mutable_grad() = Tensor();
    Tensor out = evaluate(fn, inputs);
    if (!out.requires_grad()) break;  // nothing depends on the inputs: all gradients stay zero
    Tensor unit = zeros(out.sizes(), out.options());
    unit.data_ptr<double>()[k] = 1.0;
    out.backward(unit);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& grad = inputs[i].grad();
      if (!inputs[i].requires_grad()) {
        if (grad.defined()) {
          report.inputs[i].passed = false;
          report.inputs[i].problem = "input does not require grad but received a gradient";
        }
        continue;
      }
      if (!grad.defined()) continue;
      if (grad.sizes() != inputs[i].sizes()) {
        report.inputs[i].passed = false;
        report.inputs[i].problem = fmt::format("gradient has shape {}, input has shape {}", shape_str(grad.sizes()),
                                               shape_str(inputs[i].sizes()));
        continue;
      }
      const std::vector<double> values = grad.to_vector<double>();
      for (int64_t j = 0; j < inputs[i].numel(); ++j) analytic[i][j * out_numel + k] = values[j];
    }
  }
  for (const Tensor& input : inputs) const_cast<Tensor&>(input).mutable_grad() = Tensor();

  // Numerical Jacobian, perturbing one element of one input at a time in place.
  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    GradcheckInputReport& entry = report.inputs[i];
    if (!entry.requires_grad || !entry.problem.empty()) continue;
    const Tensor& input = inputs[i];
    double* data = input.data_ptr<double>();
    // The reported element is the one furthest past its tolerance (or closest to it, when all pass).
    double worst_excess = -INFINITY;
    for (int64_t j = 0; j < input.numel(); ++j) {
      double& element = data[element_offset(input, j)];
      const double original = element;
      element = original + options.eps;
      const std::vector<double> plus = evaluate(fn, inputs).to_vector<double>();
      element = original - options.eps;
      const std::vector<double> minus = evaluate(fn, inputs).to_vector<double>();
      element = original;
      for (int64_t k = 0; k < out_numel; ++k) {
        const double numeric = (plus[k] - minus[k]) / (2 * options.eps);
        const double computed = analytic[i][j * out_numel + k];
        const double abs_error = std::abs(computed - numeric);
        double excess = abs_error - (options.atol + options.rtol * std::abs(numeric));
        if (std::isnan(excess)) excess = INFINITY;  // a NaN on either side fails
        if (excess > 0) entry.passed = false;
        if (excess > worst_excess) {
          worst_excess = excess;
          entry.worst_element = unravel(input.sizes(), j);
          entry.worst_output = k;
          entry.analytic = computed;
          entry.numeric = numeric;
        }
        const double rel_error = abs_error / std::max(std::abs(numeric), 1e-12);
        entry.max_abs_error = std::max(entry.max_abs_error, std::isnan(abs_error) ? INFINITY : abs_error);
        entry.max_rel_error = std::max(entry.max_rel_error, std::isnan(rel_error) ? INFINITY : rel_error);
      }
    }
  }
  for (const GradcheckInputReport& entry : report.inputs) report.passed = report.passed && entry.passed;
  return report;
}

std::string GradcheckReport::summary() const {
  std::string text = check + (passed ? " passed\n" : " FAILED\n");
  for (const GradcheckInputReport& entry : inputs) {
    if (!entry.requires_grad && entry.problem.empty()) {
      text += fmt::format("  input {}: does not require grad (no gradient, as expected)\n", entry.input);
      continue;
    }
    if (!entry.problem.empty()) {
      text += fmt::format("  input {}: FAILED: {}\n", entry.input, entry.problem);
      continue;
    }
    text += fmt::format("  input {}: {} max abs error {:.3g}, max rel error {:.3g}", entry.input,
                        entry.passed ? "ok," : "FAILED,", entry.max_abs_error, entry.max_rel_error);
    if (!entry.passed) {
      const std::string output = entry.worst_output_meaning.empty() ? fmt::format("output element {}", entry.worst_output)
                                                                    : entry.worst_output_meaning;
      text += fmt::format("; at element {} ({}): backward gives {:.8g}, finite differences {:.8g}",
                          shape_str(entry.worst_element), output, entry.analytic, entry.numeric);
    }
    text += "\n";
  }
  return text;
}

GradcheckReport gradgradcheck(const GradcheckFunction& fn, const std::vector<Tensor>& inputs,
                              const Tensor& grad_output, const GradcheckOptions& options) {
  std::vector<size_t> differentiated;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK(inputs[i].defined(), "gradgradcheck: input {} is undefined", i);
    if (inputs[i].requires_grad()) differentiated.push_back(i);
  }
  EMBER_CHECK(!differentiated.empty(), "gradgradcheck: no input requires grad");

  Tensor v = grad_output;
  if (!v.defined()) {
    NoGradGuard no_grad;
    const Tensor output = fn(inputs);
    EMBER_CHECK(output.defined(), "gradgradcheck: fn returned an undefined tensor");
    // Distinct entries in [-1, 1], so that no error hides behind a symmetric v.
    v = cos(mul(arange(static_cast<double>(output.numel()), TensorOptions(kFloat64)), 1.7)).reshape(output.sizes());
  }
  EMBER_CHECK(v.dtype() == kFloat64, "gradgradcheck: grad_output is {}; it must be float64", v.dtype());
  v = v.detach().clone().requires_grad_();

  // Where each input's gradient lies in the joined result, to name the worst element.
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (size_t i : differentiated) {
    offsets.push_back(total);
    total += inputs[i].numel();
  }

  const size_t n = inputs.size();
  auto first_derivatives = [&](const std::vector<Tensor>& arguments) {
    // gradcheck evaluates its finite differences under NoGradGuard; the gradients must still be computed.
    autograd::GradModeGuard grad_mode(true);
    const std::vector<Tensor> fn_inputs(arguments.begin(), arguments.begin() + static_cast<int64_t>(n));
    const Tensor output = fn(fn_inputs);
    EMBER_CHECK(output.defined() && output.sizes() == arguments[n].sizes(),
                "gradgradcheck: fn returned shape {} but grad_output has shape {}",
                output.defined() ? shape_str(output.sizes()) : "(undefined)", shape_str(arguments[n].sizes()));
    std::vector<Tensor> wanted;
    for (size_t i : differentiated) wanted.push_back(fn_inputs[i]);
    std::vector<Tensor> flat;
    if (output.requires_grad()) {
      const std::vector<Tensor> gradients =
          autograd::grad({output}, wanted, {arguments[n]}, {.create_graph = true, .allow_unused = true});
      for (size_t j = 0; j < gradients.size(); ++j) {
        flat.push_back(gradients[j].defined() ? reshape(gradients[j], {-1}) : zeros({wanted[j].numel()}, kFloat64));
      }
    } else {
      for (const Tensor& input : wanted) flat.push_back(zeros({input.numel()}, kFloat64));
    }
    return cat(flat, 0);
  };

  std::vector<Tensor> arguments = inputs;
  arguments.push_back(v);
  GradcheckReport report = gradcheck(first_derivatives, arguments, options);
  report.check = "gradgradcheck";
  for (GradcheckInputReport& entry : report.inputs) {
    if (entry.passed) continue;
    const auto segment = std::upper_bound(offsets.begin(), offsets.end(), entry.worst_output) - offsets.begin() - 1;
    if (segment < 0) continue;
    const size_t of_input = differentiated[segment];
    entry.worst_output_meaning =
        fmt::format("element {} of the gradient of input {}",
                    shape_str(unravel(inputs[of_input].sizes(), entry.worst_output - offsets[segment])), of_input);
  }
  return report;
}

}  // namespace ember
