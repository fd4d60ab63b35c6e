// vjp, jvp, hvp, jacobian and hessian, all built on autograd::grad. Each turns grad mode on
// for its duration: fn is differentiated even when the caller is under NoGradGuard.
#include "core/autograd/functional.h"

#include "core/autograd/grad.h"
#include "core/autograd/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/join.h"
#include "core/ops/reduce.h"
#include "core/ops/views.h"

namespace ember::autograd {
namespace {

// The tensors fn is evaluated at: leaves of their own, except under create_graph for an input
// that requires grad, which is kept (through a view) so the results stay connected to it.
std::vector<Tensor> differentiable_inputs(const char* api, const std::vector<Tensor>& inputs, bool create_graph) {
  EMBER_CHECK(!inputs.empty(), "{}: no inputs given", api);
  std::vector<Tensor> prepared;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    EMBER_CHECK(input.defined(), "{}: input {} is undefined", api, i);
    EMBER_CHECK(is_floating_point(input.dtype()), "{}: input {} is {}; it must be floating point", api, i,
                input.dtype());
    if (create_graph && input.requires_grad()) {
      prepared.push_back(view(input, input.sizes()));
    } else {
      Tensor leaf = input.detach();
      leaf.requires_grad_();
      prepared.push_back(leaf);
    }
  }
  return prepared;
}

Tensor evaluate(const char* api, const Function& fn, const std::vector<Tensor>& inputs) {
  Tensor output = fn(inputs);
  EMBER_CHECK(output.defined(), "{}: fn returned an undefined tensor", api);
  return output;
}

// autograd::grad, with zeros for an input the output does not depend on (as torch's
// functional helpers give), and nothing to differentiate when the output has no graph.
std::vector<Tensor> gradients_or_zeros(const Tensor& output, const std::vector<Tensor>& inputs,
                                       const Tensor& grad_output, bool create_graph, bool retain_graph) {
  std::vector<Tensor> gradients(inputs.size());
  if (output.requires_grad()) {
    gradients = grad({output}, inputs, {grad_output},
                     {.retain_graph = retain_graph, .create_graph = create_graph, .allow_unused = true});
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!gradients[i].defined()) gradients[i] = zeros_like(inputs[i].detach());
  }
  return gradients;
}

void check_like(const char* api, const char* what, const Tensor& given, const Tensor& like, size_t index) {
  EMBER_CHECK(given.defined(), "{}: {} {} is undefined", api, what, index);
  EMBER_CHECK(given.sizes() == like.sizes(), "{}: {} {} has shape {}, expected {}", api, what, index,
              shape_str(given.sizes()), shape_str(like.sizes()));
}

Tensor output_gradient(const char* api, const Tensor& output, const Tensor& v) {
  if (v.defined()) {
    EMBER_CHECK(v.sizes() == output.sizes(), "{}: v has shape {} but fn's output has shape {}", api,
                shape_str(v.sizes()), shape_str(output.sizes()));
    return v;
  }
  EMBER_CHECK(output.numel() == 1, "{}: v can be left out only for a one-element output; fn's output has shape {}",
              api, shape_str(output.sizes()));
  return ones_like(output.detach());
}

// What the caller gets: detached unless create_graph asked for a graph.
Tensor result(const Tensor& t, bool create_graph) { return create_graph ? t : t.detach(); }

}  // namespace

Derivative vjp(const Function& fn, const std::vector<Tensor>& inputs, const Tensor& v, bool create_graph) {
  GradModeGuard grad_mode(true);
  const std::vector<Tensor> x = differentiable_inputs("vjp", inputs, create_graph);
  const Tensor output = evaluate("vjp", fn, x);
  Derivative d{result(output, create_graph), {}};
  for (const Tensor& g : gradients_or_zeros(output, x, output_gradient("vjp", output, v), create_graph, create_graph)) {
    d.derivatives.push_back(result(g, create_graph));
  }
  return d;
}

Derivative jvp(const Function& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& tangents,
               bool create_graph) {
  GradModeGuard grad_mode(true);
  EMBER_CHECK(tangents.size() == inputs.size(), "jvp: {} tangents for {} inputs", tangents.size(), inputs.size());
  const std::vector<Tensor> x = differentiable_inputs("jvp", inputs, create_graph);
  for (size_t i = 0; i < x.size(); ++i) check_like("jvp", "tangent", tangents[i], x[i], i);
  const Tensor output = evaluate("jvp", fn, x);
  Derivative d{result(output, create_graph), {}};
  if (!output.requires_grad()) {
    d.derivatives.push_back(zeros_like(output.detach()));
    return d;
  }
  // u -> J^T u is linear in u; the gradient of <J^T u, tangents> with respect to u is J tangents.
  Tensor u = zeros_like(output.detach());
  u.requires_grad_();
  const std::vector<Tensor> transposed = gradients_or_zeros(output, x, u, /*create_graph=*/true, true);
  Tensor inner;
  for (size_t i = 0; i < x.size(); ++i) {
    const Tensor term = sum(mul(transposed[i], tangents[i]));
    inner = inner.defined() ? add(inner, term) : term;
  }
  const std::vector<Tensor> product = gradients_or_zeros(inner, {u}, Tensor(), create_graph, create_graph);
  d.derivatives.push_back(result(product[0], create_graph));
  return d;
}

Derivative hvp(const Function& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v,
               bool create_graph) {
  GradModeGuard grad_mode(true);
  EMBER_CHECK(v.size() == inputs.size(), "hvp: {} vectors v for {} inputs", v.size(), inputs.size());
  const std::vector<Tensor> x = differentiable_inputs("hvp", inputs, create_graph);
  for (size_t i = 0; i < x.size(); ++i) check_like("hvp", "v", v[i], x[i], i);
  const Tensor output = evaluate("hvp", fn, x);
  const std::vector<Tensor> gradient =
      gradients_or_zeros(output, x, output_gradient("hvp", output, Tensor()), /*create_graph=*/true, true);
  Tensor inner;
  for (size_t i = 0; i < x.size(); ++i) {
    const Tensor term = sum(mul(gradient[i], v[i]));
    inner = inner.defined() ? add(inner, term) : term;
  }
  Derivative d{result(output, create_graph), {}};
  for (const Tensor& g : gradients_or_zeros(inner, x, Tensor(), create_graph, create_graph)) {
    d.derivatives.push_back(result(g, create_graph));
  }
  return d;
}

namespace {

// Row k of each input's Jacobian is the gradient of output element k: one pass per element.
std::vector<Tensor> jacobian_of(const Tensor& output, const std::vector<Tensor>& x, bool create_graph) {
  const int64_t rows = output.numel();
  std::vector<std::vector<Tensor>> per_input(x.size());
  for (int64_t k = 0; k < rows; ++k) {
    Tensor unit = zeros({rows}, output.options());
    {
      NoGradGuard no_grad;
      unit.narrow(0, k, 1).fill_(1.0);
    }
    const std::vector<Tensor> gradients =
        gradients_or_zeros(output, x, unit.reshape(output.sizes()), create_graph, /*retain_graph=*/true);
    for (size_t i = 0; i < x.size(); ++i) per_input[i].push_back(result(gradients[i], create_graph));
  }
  std::vector<Tensor> jacobians;
  for (size_t i = 0; i < x.size(); ++i) {
    Shape shape = output.sizes();
    shape.insert(shape.end(), x[i].sizes().begin(), x[i].sizes().end());
    jacobians.push_back(rows == 0 ? zeros(shape, x[i].options()) : reshape(stack(per_input[i], 0), shape));
  }
  return jacobians;
}

}  // namespace

std::vector<Tensor> jacobian(const Function& fn, const std::vector<Tensor>& inputs, bool create_graph) {
  GradModeGuard grad_mode(true);
  const std::vector<Tensor> x = differentiable_inputs("jacobian", inputs, create_graph);
  return jacobian_of(evaluate("jacobian", fn, x), x, create_graph);
}

std::vector<std::vector<Tensor>> hessian(const Function& fn, const std::vector<Tensor>& inputs, bool create_graph) {
  GradModeGuard grad_mode(true);
  const std::vector<Tensor> x = differentiable_inputs("hessian", inputs, create_graph);
  const Tensor output = evaluate("hessian", fn, x);
  const std::vector<Tensor> gradient =
      gradients_or_zeros(output, x, output_gradient("hessian", output, Tensor()), /*create_graph=*/true, true);
  std::vector<std::vector<Tensor>> blocks;
  for (const Tensor& g : gradient) blocks.push_back(jacobian_of(g, x, create_graph));
  return blocks;
}

}  // namespace ember::autograd
