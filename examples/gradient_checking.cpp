// Worked example 7, "Gradient checking": how to test gradients with ember's gradcheck, from
// one op to a layer to a whole transformer block, and what a failing report looks like; then
// second derivatives with gradgradcheck, and a double backward it catches.
//
//   ./build/examples/gradient_checking [--seed S]
//
// Exits 0 when every correct gradient passes and every broken one is caught.
#include <cmath>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/run_main.h"
#include "ember.h"

using namespace ember;

namespace {

// gradcheck(fn, inputs) evaluates fn(inputs) and builds its Jacobian twice: once from
// backward() (one backward pass per output element) and once by nudging each input element
// by +-eps and differencing the outputs. Where the two disagree beyond atol + rtol * |numeric|
// it fails, and the report says for which input, at which element, and both values there.
// Inputs that require grad must be float64 leaves: in float32 the finite differences would be
// dominated by rounding error.

// A float64 leaf of normal values times `scale`: the usual gradcheck input.
Tensor leaf(const Shape& shape, double scale = 1.0) {
  return mul(randn(shape, kFloat64), scale).detach().requires_grad_();
}

// A layer's own parameters go into gradcheck's input list after x, so that each is nudged and
// its gradient compared too. fn still calls the layer as usual: the layer holds the very same
// tensors, and gradcheck perturbs them in place.
std::vector<Tensor> input_and_parameters(const Tensor& x, const nn::Module& layer) {
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : layer.parameters()) inputs.push_back(p);
  return inputs;
}

std::string indented(const std::string& text) {
  std::string result;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const size_t stop = end == std::string::npos ? text.size() : end + 1;
    result += "   " + text.substr(start, stop - start);
    start = stop;
  }
  return result;
}

// A custom op to test: tanh(x * scale), x [n, features] and scale [features] broadcast over
// the rows, as a learned per-feature gain in front of a tanh would be.
//   d/dx     = grad * (1 - y^2) * scale
//   d/dscale = the same with x in place of scale, summed over the rows scale was broadcast to
struct ScaledTanh {
  static constexpr const char* name = "scaled_tanh";
  static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
    const Tensor y = tanh(mul(inputs[0], inputs[1]));
    ctx.save_for_backward({inputs[0], inputs[1], y});
    return y;
  }
  static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad_output) {
    const std::vector<Tensor> saved = ctx.saved_tensors();
    const Tensor &x = saved[0], &scale = saved[1], &y = saved[2];
    const Tensor grad_pre = mul(grad_output, 1.0 - mul(y, y));  // gradient of x * scale
    return {mul(grad_pre, scale), sum_to(mul(grad_pre, x), scale.sizes())};
  }
};

// The same op with a bug of the commonest kind: the chain rule stops one factor short, and the
// gradient of x lacks the `scale` that x was multiplied by. Everything still runs, shapes are
// right, training would even move in roughly the right direction: only a check finds it.
struct ScaledTanhMissingFactor {
  static constexpr const char* name = "scaled_tanh_missing_factor";
  static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
    return ScaledTanh::forward(ctx, inputs);
  }
  static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad_output) {
    const std::vector<Tensor> saved = ctx.saved_tensors();
    const Tensor &x = saved[0], &scale = saved[1], &y = saved[2];
    const Tensor grad_pre = mul(grad_output, 1.0 - mul(y, y));
    return {grad_pre /* should be mul(grad_pre, scale) */, sum_to(mul(grad_pre, x), scale.sizes())};
  }
};

// The same op again with a backward that is right to first order but differentiates badly: it
// detaches what it saved, so under create_graph its gradient looks constant in x and scale.
// gradcheck cannot see this (the first derivatives are exact); gradgradcheck does.
struct ScaledTanhDetachedBackward {
  static constexpr const char* name = "scaled_tanh_detached_backward";
  static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
    return ScaledTanh::forward(ctx, inputs);
  }
  static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad_output) {
    const std::vector<Tensor> saved = ctx.saved_tensors();
    const Tensor x = saved[0].detach(), scale = saved[1].detach(), y = saved[2].detach();
    const Tensor grad_pre = mul(grad_output, 1.0 - mul(y, y));
    return {mul(grad_pre, scale), sum_to(mul(grad_pre, x), scale.sizes())};
  }
};

// Counts outcomes that differ from what the example expects.
struct Expectations {
  int unexpected = 0;
  void expect(const GradcheckReport& report, bool should_pass, const std::string& what) {
    if (report.passed == should_pass) return;
    ++unexpected;
    fmt::print(stderr, "unexpected: {} {} gradcheck\n", what, report.passed ? "passed" : "failed");
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Gradient checking with ember's gradcheck: ops, layers, a whole block, and a broken backward"};
  uint64_t seed = 0;
  app.add_option("--seed", seed, "random seed")->check(examples::at_least(0));

  return examples::run_main(app, argc, argv, [&] {
    manual_seed(seed);
    Expectations expectations;

    fmt::print("1. one op\n");
    {
      // softmax along the last dim. Each output row depends on the whole input row, so the
      // Jacobian has off-diagonal entries: a good test of a backward that mixes elements.
      const Tensor x = leaf({3, 5});
      const GradcheckReport report =
          gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], -1); }, {x});
      fmt::print("   softmax(x, -1), x [3, 5]\n{}", indented(report.summary()));
      expectations.expect(report, true, "softmax");
    }
    {
      // Two inputs, one of them broadcast: matmul of a batch [2, 3, 4] with one matrix [4, 2].
      // The matrix's gradient must sum over the batch; each input gets its own line.
      const Tensor a = leaf({2, 3, 4}), b = leaf({4, 2});
      const GradcheckReport report =
          gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b});
      fmt::print("   matmul(a [2, 3, 4], b [4, 2])\n{}", indented(report.summary()));
      expectations.expect(report, true, "matmul");
    }
    {
      // A custom op is checked the same way. Both of its inputs require grad, so both
      // gradients are compared.
      const Tensor x = leaf({4, 3}), scale = leaf({3});
      const GradcheckReport report = gradcheck(
          [](const std::vector<Tensor>& in) { return autograd::apply<ScaledTanh>({in[0], in[1]}); }, {x, scale});
      fmt::print("   custom op scaled_tanh(x [4, 3], scale [3])\n{}", indented(report.summary()));
      expectations.expect(report, true, "scaled_tanh");
    }

    fmt::print("\n2. a layer: convert it to float64, list its parameters after the input\n");
    {
      nn::Linear linear(4, 3);
      linear.to(kFloat64);  // converts the parameters in place: linear.weight is still the leaf
      const GradcheckReport report =
          gradcheck([&](const std::vector<Tensor>& in) { return linear.forward(in[0]); },
                    input_and_parameters(leaf({2, 4}), linear));
      fmt::print("   Linear(4, 3); inputs: x [2, 4], weight [3, 4], bias [3]\n{}", indented(report.summary()));
      expectations.expect(report, true, "Linear");
    }
    {
      // Fresh LayerNorm parameters are ones and zeros: a special point where a wrong gradient
      // of weight or bias can still look right. Random values make the test stronger.
      nn::LayerNorm norm(5);
      norm.to(kFloat64);
      {
        NoGradGuard no_grad;  // writing into parameters is not part of the model
        norm.weight.copy_(randn({5}, kFloat64));
        norm.bias.copy_(randn({5}, kFloat64));
      }
      const GradcheckReport report = gradcheck([&](const std::vector<Tensor>& in) { return norm.forward(in[0]); },
                                               input_and_parameters(leaf({2, 3, 5}), norm));
      fmt::print("   LayerNorm(5); inputs: x [2, 3, 5], weight [5], bias [5]\n{}", indented(report.summary()));
      expectations.expect(report, true, "LayerNorm");
    }

    fmt::print("\n3. a whole block: TransformerEncoderLayer, every parameter included\n");
    {
      // Tiny sizes keep the Jacobian small (gradcheck runs two forwards per input element and
      // one backward per output element); the code paths are the full-size ones. dropout 0:
      // see step 4 for why.
      nn::TransformerLayerOptions options{.d_model = 8, .num_heads = 2, .d_ff = 16, .dropout = 0.0};
      nn::TransformerEncoderLayer layer(options);
      layer.to(kFloat64);
      // The last key of the second sequence is padding, so the masked path is checked too.
      const Tensor padding = tensor({false, false, false, false, false, false, false, true}, {2, 4});
      const std::vector<Tensor> inputs = input_and_parameters(leaf({2, 4, 8}), layer);
      const GradcheckReport report = gradcheck(
          [&](const std::vector<Tensor>& in) { return layer.forward(in[0], {.key_padding_mask = padding}); }, inputs);
      // The summary numbers the inputs; pairing them with the parameters' names reads better.
      std::vector<std::string> names{"x"};
      for (const auto& [name, parameter] : layer.named_parameters()) names.push_back(name);
      fmt::print("   post-LN, d_model 8, 2 heads, d_ff 16, x [2, 4, 8] with one padded key: {}\n",
                 report.passed ? "passed" : "FAILED");
      for (size_t i = 0; i < inputs.size(); ++i) {
        const GradcheckInputReport& entry = report.inputs[i];
        fmt::print("     {:<29} {:<10} {}  max abs error {:.1e}, max rel error {:.1e}\n", names[i],
                   shape_str(inputs[i].sizes()), entry.passed ? "ok" : "FAILED", entry.max_abs_error,
                   entry.max_rel_error);
      }
      // k_proj.bias shows a relative error near 1 and still passes. Its true gradient is zero:
      // adding one vector to every key adds the same number to all of a query's scores, which
      // softmax ignores. Rounding noise is then all of the value, so relative error means
      // nothing there; that is why an element passes on atol + rtol * |numeric| together.
      fmt::print("   (k_proj.bias: its true gradient is 0, so the relative error of rounding noise is ~1)\n");
      expectations.expect(report, true, "TransformerEncoderLayer");
    }

    fmt::print("\n4. two ways to get a check wrong\n");
    {
      // Finite differences need the inputs' bits: a float32 input is refused with a message.
      try {
        gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], -1); },
                  {randn({3, 5}).requires_grad_()});
      } catch (const Error& error) {
        fmt::print("   a float32 input:\n     {}\n", error.what());
      }
      // Dropout draws a new mask on every call, so the two evaluations of a finite difference
      // see different functions and the numbers are noise. Check with dropout 0, or in eval()
      // mode, which switches every dropout of the layer off.
      nn::TransformerEncoderLayer layer({.d_model = 8, .num_heads = 2, .d_ff = 16, .dropout = 0.1});
      layer.to(kFloat64);
      auto fn = [&](const std::vector<Tensor>& in) { return layer.forward(in[0]); };
      const std::vector<Tensor> inputs = input_and_parameters(leaf({1, 3, 8}), layer);
      const GradcheckReport training = gradcheck(fn, inputs);
      layer.eval();
      const GradcheckReport evaluation = gradcheck(fn, inputs);
      fmt::print("   an encoder layer with dropout 0.1 in training mode: {} (max abs error of x {:.3g})\n",
                 training.passed ? "passed" : "FAILED", training.inputs[0].max_abs_error);
      fmt::print("   the same layer after eval(): {} (max abs error of x {:.3g})\n",
                 evaluation.passed ? "passed" : "FAILED", evaluation.inputs[0].max_abs_error);
      expectations.expect(training, false, "TransformerEncoderLayer with dropout in training mode");
      expectations.expect(evaluation, true, "TransformerEncoderLayer in eval mode");
    }

    fmt::print("\n5. a backward with a bug, caught\n");
    {
      // Distinct gains make the missing factor easy to recognise in the report.
      const Tensor x = leaf({4, 3});
      const Tensor scale = tensor({0.5, -1.5, 2.5}, {3}, kFloat64).requires_grad_();
      const GradcheckReport report = gradcheck(
          [](const std::vector<Tensor>& in) { return autograd::apply<ScaledTanhMissingFactor>({in[0], in[1]}); },
          {x, scale});
      fmt::print("   scaled_tanh_missing_factor(x [4, 3], scale [3] = [0.5, -1.5, 2.5])\n{}",
                 indented(report.summary()));
      expectations.expect(report, false, "scaled_tanh_missing_factor");
      // Reading the report: input 0 (x) fails, input 1 (scale) passes, so the bug is in the
      // gradient of x alone. At the worst element, finite differences / backward is exactly the
      // gain of that element's column: the factor the backward forgot.
      const GradcheckInputReport& worst = report.inputs[0];
      if (!worst.passed) {
        const int64_t column = worst.worst_element[1];
        fmt::print("   at x{}: finite differences / backward = {:.6g}, and scale[{}] = {:.6g}\n",
                   shape_str(worst.worst_element), worst.numeric / worst.analytic, column,
                   scale.at<double>(column));
      }
    }

    fmt::print("\n6. second derivatives: gradgradcheck\n");
    {
      // gradgradcheck differentiates the gradient itself (autograd::grad with create_graph) and
      // compares that with finite differences of the gradient, for each input and for the
      // output's gradient v. Ops whose backward is written with tensor ops pass by themselves.
      const Tensor x = leaf({4, 3}), scale = leaf({3});
      const GradcheckReport right = gradgradcheck(
          [](const std::vector<Tensor>& in) { return autograd::apply<ScaledTanh>({in[0], in[1]}); }, {x, scale});
      fmt::print("   scaled_tanh (input 2 is the output's gradient v)\n{}", indented(right.summary()));
      expectations.expect(right, true, "scaled_tanh (gradgradcheck)");
      auto detached = [](const std::vector<Tensor>& in) {
        return autograd::apply<ScaledTanhDetachedBackward>({in[0], in[1]});
      };
      const GradcheckReport first = gradcheck(detached, {x, scale});
      const GradcheckReport second = gradgradcheck(detached, {x, scale});
      fmt::print("   scaled_tanh_detached_backward: gradcheck {}; but\n{}", first.passed ? "passed" : "FAILED",
                 indented(second.summary()));
      expectations.expect(first, true, "scaled_tanh_detached_backward (gradcheck)");
      expectations.expect(second, false, "scaled_tanh_detached_backward (gradgradcheck)");
    }

    if (expectations.unexpected == 0) fmt::print("\nevery correct gradient passed and every broken one was caught\n");
    return expectations.unexpected == 0 ? 0 : 1;
  });
}
