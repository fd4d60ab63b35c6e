// Derivatives of a whole function, as torch.autograd.functional computes them: vector-Jacobian
// and Jacobian-vector products, Hessian-vector products, and full Jacobians and Hessians.
//
//   auto f = [](const std::vector<Tensor>& x) { return sum(mul(x[0], mul(x[0], x[0]))); };
//   autograd::Derivative h = autograd::hvp(f, {x}, {v});   // h.value = f(x), h.derivatives[0] = 6 x v
//
// Each helper evaluates fn at copies of the inputs that require grad, so the caller's tensors
// and their .grad are left alone. An output that does not depend on an input gets zeros for it.
// With create_graph the results are differentiable (with respect to the inputs that required
// grad when passed).
//
// jvp uses the double-vjp trick rather than a forward mode: u -> J^T u is linear, so the
// gradient of <J^T u, v> with respect to u is J v. It costs one forward pass and two backward
// passes, the first under create_graph (so every op fn uses needs a second derivative).
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

using Function = std::function<Tensor(const std::vector<Tensor>&)>;

// fn's value at the inputs, and one derivative per input (or, for jvp, one of the output's shape).
struct Derivative {
  Tensor value;
  std::vector<Tensor> derivatives;
};

// v^T J: the gradient of <fn(inputs), v>; v may be left out for a one-element output.
Derivative vjp(const Function& fn, const std::vector<Tensor>& inputs, const Tensor& v = Tensor(),
               bool create_graph = false);
// J u for tangents u (one per input, shaped like it): derivatives[0] has the output's shape.
Derivative jvp(const Function& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& tangents,
               bool create_graph = false);
// H v for a function with a one-element output: the gradient of <grad fn, v>, one per input.
Derivative hvp(const Function& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& v,
               bool create_graph = false);
// d fn / d input i, of shape output.sizes() + inputs[i].sizes(), one per input: one backward
// pass per output element.
std::vector<Tensor> jacobian(const Function& fn, const std::vector<Tensor>& inputs, bool create_graph = false);
// d^2 fn / d input i d input j, of shape inputs[i].sizes() + inputs[j].sizes(), for a function
// with a one-element output: the Jacobian of its gradient.
std::vector<std::vector<Tensor>> hessian(const Function& fn, const std::vector<Tensor>& inputs,
                                         bool create_graph = false);

}  // namespace ember::autograd
