// Worked example 5, "Your own op": softplus added to ember through the extension API, its
// gradient checked with gradcheck, and the op put to work as the activation of a small network.
//
//   ./build/examples/your_own_op [--steps N] [--seed S] [--threads N] [--device cpu|cuda]
//
// Read it top to bottom: each numbered step prints what it shows.
#include <cmath>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/options.h"
#include "common/run_main.h"
#include "ember.h"

using namespace ember;

namespace {

// ---- Step 1: the op ------------------------------------------------------------------------
//
// softplus(x) = log(1 + e^x) is a smooth relu: close to 0 far left, close to x far right, and
// its derivative is the logistic sigmoid. Typed in as it reads, e^x overflows float32 once x
// passes about 88, and the whole expression becomes inf. Splitting off the positive part gives
// the same function with an exponent that is never positive:
//
//   softplus(x) = max(x, 0) + log(1 + e^-|x|)
//
// An op is a struct of two static functions, the shape of torch.autograd.Function:
// - forward(ctx, inputs) computes the output from the inputs. It runs with recording switched
//   off, so the ops inside it do not build a graph of their own: the whole op is one node.
//   Whatever backward will need goes into ctx (tensors through save_for_backward).
// - backward(ctx, grad_output) gets the gradient of the loss with respect to the output and
//   returns one gradient per input, each shaped like that input. The chain rule is the
//   multiplication by grad_output: d loss/dx = d loss/dy * dy/dx = grad_output * sigmoid(x).
struct SoftplusFunction {
  static constexpr const char* name = "softplus";  // grad_fn() reports "SoftplusBackward"

  static Tensor forward(autograd::Context& ctx, const std::vector<Tensor>& inputs) {
    const Tensor& x = inputs.at(0);
    // Check the input here, with a message that names the op: an error raised deep inside
    // exp or log would not tell the caller which of their calls went wrong.
    EMBER_CHECK(x.defined(), "softplus: the input tensor is undefined");
    EMBER_CHECK(is_floating_point(x.dtype()), "softplus: expected a float32 or float64 tensor, got {} of shape {}",
                x.dtype(), shape_str(x.sizes()));
    // Saved tensors are version-checked: if x is modified in place before backward runs,
    // backward refuses to use the stale value instead of computing a wrong gradient.
    ctx.save_for_backward({x});
    return add(relu(x), log(add(exp(neg(abs(x))), 1.0)));
  }

  static std::vector<Tensor> backward(autograd::Context& ctx, const Tensor& grad_output) {
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(grad_output, sigmoid(x))};
  }
};

// What users call: apply() runs forward and records the node whose backward is ours.
Tensor softplus(const Tensor& x) { return autograd::apply<SoftplusFunction>({x}); }

// The same function typed in as it reads, with built-in ops; autograd differentiates it
// through exp and log on its own. Used to check our op's values.
Tensor softplus_as_written(const Tensor& x) { return log(add(exp(x), 1.0)); }

// ---- Step 4: the op as a layer --------------------------------------------------------------
//
// A module with no parameters whose forward is the op. Being a UnaryModule, it slots into
// nn::Sequential like nn::ReLU or nn::GELU.
class Softplus : public nn::UnaryModule {
 public:
  Softplus() : UnaryModule("Softplus") {}
  Tensor forward(const Tensor& x) override { return softplus(x); }
};

std::string values_str(const Tensor& t) {
  std::string text = "[";
  for (double v : t.to_vector<double>()) text += fmt::format("{}{:.6g}", text.size() > 1 ? ", " : "", v);
  return text + "]";
}

// Every line of a multi-line text, indented to sit under a step's heading.
std::string indented(const std::string& text, const std::string& indent) {
  std::string result;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const size_t stop = end == std::string::npos ? text.size() : end + 1;
    result += indent + text.substr(start, stop - start);
    start = stop;
  }
  return result;
}

double max_abs_difference(const Tensor& a, const Tensor& b) { return max(abs(sub(a, b))).item(); }

// Points in the square [-1.5, 1.5]^2, labelled 1 inside the unit circle and 0 outside: a
// boundary no straight line can draw, so the network needs its nonlinearity.
struct Points {
  Tensor xy;      // float32 [n, 2]
  Tensor labels;  // int64 [n]
};

Points circle_points(int64_t n) {
  Points points;
  points.xy = sub(mul(rand({n, 2}), 3.0), 1.5);
  points.labels = lt(sum(mul(points.xy, points.xy), {1}), 1.0).to(kInt64);
  return points;
}

double accuracy(nn::Sequential& model, const Points& points) {
  NoGradGuard no_grad;
  model.eval();
  const Tensor predicted = argmax(model.forward(points.xy), 1);
  model.train();
  return mean(eq(predicted, points.labels).to(kFloat32)).item();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Your own op: softplus through ember's extension API, checked and trained with"};
  int steps = 300;
  uint64_t seed = 0;
  app.add_option("--steps", steps, "training steps")->check(examples::between(1, 1000000));
  app.add_option("--seed", seed, "random seed")->check(examples::at_least(0));
  std::string device_name = "cpu";
  int threads = 0;
  app.add_option("--device", device_name, "where the network trains: cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: OMP_NUM_THREADS, else one per core)")
      ->check(examples::at_least(0))
      ->capture_default_str();

  return examples::run_main(app, argc, argv, [&] {
    // The op is written with tensor ops, so it runs wherever its input lives.
    const Device device = train::parse_device(device_name);
    train::set_threads(threads);
    manual_seed(seed);

    fmt::print("1. softplus as an ember op\n");
    const Tensor x = tensor({-100.0f, -5.0f, -1.0f, 0.0f, 1.0f, 5.0f, 100.0f}, {7}).requires_grad_();
    const Tensor y = softplus(x);
    fmt::print("   x           {}\n", values_str(x));
    fmt::print("   softplus(x) {}\n", values_str(y));
    fmt::print("   y.grad_fn() is {}: the whole op is one node of the graph\n", y.grad_fn()->name());
    sum(y).backward();
    fmt::print("   d sum(y)/dx {}  (sigmoid(x))\n", values_str(x.grad()));

    fmt::print("\n2. the same values as the formula typed in with built-in ops\n");
    {
      // Where the formula as written does not overflow, both must agree to float32 rounding.
      const Tensor grid = arange(-20.0, 20.0, 0.01);
      const double difference = max_abs_difference(softplus(grid), softplus_as_written(grid));
      fmt::print("   on {} points in [-20, 20): max |softplus - log(1 + exp(x))| = {:.3g}\n", grid.numel(),
                 difference);
      EMBER_CHECK(difference < 1e-5, "softplus differs from log(1 + exp(x)) by {} on [-20, 20)", difference);

      // Far right, the formula as written overflows: e^100 is inf in float32, and its gradient
      // is 0 * inf = NaN. The rewritten forward and the sigmoid backward stay finite.
      Tensor big = tensor({100.0f}, {1}).requires_grad_();
      const Tensor ours = softplus(big);
      ours.sum().backward();
      const double our_gradient = big.grad().item();
      big.mutable_grad() = Tensor();  // gradients accumulate; start the second one from zero
      const Tensor as_written = softplus_as_written(big);
      as_written.sum().backward();
      fmt::print("   at x = 100: softplus {} with gradient {}; log(1 + exp(x)) {} with gradient {}\n",
                 ours.item(), our_gradient, as_written.item(), big.grad().item());
    }

    fmt::print("\n3. gradcheck in float64\n");
    {
      // gradcheck compares the Jacobian our backward gives with central finite differences of
      // forward. float64 keeps the differences' rounding error far below the tolerances. The
      // input covers both tails and the middle, where the two branches of max(x, 0) meet.
      const Tensor input = mul(randn({3, 4}, kFloat64), 6.0).detach().requires_grad_();
      const GradcheckReport report =
          gradcheck([](const std::vector<Tensor>& in) { return softplus(in[0]); }, {input});
      fmt::print("   input {}\n", values_str(input));
      fmt::print("{}", indented(report.summary(), "   "));
      EMBER_CHECK(report.passed, "softplus failed gradcheck:\n{}", report.summary());
    }

    fmt::print("\n4. softplus inside a network that learns\n");
    Points train = circle_points(512);
    Points test = circle_points(512);
    train = {train.xy.to(device), train.labels.to(device)};
    test = {test.xy.to(device), test.labels.to(device)};
    auto model = std::make_shared<nn::Sequential>(
        std::make_shared<nn::Linear>(2, 32), std::make_shared<Softplus>(), std::make_shared<nn::Linear>(32, 32),
        std::make_shared<Softplus>(), std::make_shared<nn::Linear>(32, 2));
    fmt::print("   task: is a point of [-1.5, 1.5]^2 inside the unit circle? {} training points, {} test points\n",
               train.xy.size(0), test.xy.size(0));
    fmt::print("   model: Linear(2, 32) Softplus Linear(32, 32) Softplus Linear(32, 2), {} parameters\n",
               model->num_parameters());
    model->to(device);
    nn::Adam optimizer(model->parameters(), {.lr = 1e-2});
    fmt::print("   test accuracy before training {:.1f}%\n", 100 * accuracy(*model, test));
    for (int step = 1; step <= steps; ++step) {
      const Tensor loss = nn::cross_entropy(model->forward(train.xy), train.labels);
      optimizer.zero_grad();
      loss.backward();  // runs SoftplusFunction::backward twice per step, once per layer
      optimizer.step();
      if (step == 1 || step % 50 == 0 || step == steps) fmt::print("   step {:4d}  loss {:.4f}\n", step, loss.item());
    }
    const double test_accuracy = accuracy(*model, test);
    fmt::print("   test accuracy after training {:.1f}%\n", 100 * test_accuracy);

    fmt::print("\n5. bad input: clear errors, not crashes\n");
    try {
      softplus(arange(5.0, kInt64));
    } catch (const Error& error) {
      fmt::print("   softplus of an int64 tensor:\n     {}\n", error.what());
    }
    try {
      model->forward(randn({4, 3}));
    } catch (const Error& error) {
      fmt::print("   points with 3 coordinates into a model built for 2:\n     {}\n", error.what());
    }
    try {
      // Not a leaf: a leaf that requires grad may not be written in place at all.
      Tensor h = mul(randn({3}).requires_grad_(), 2.0);
      const Tensor out = softplus(h);
      h.mul_(0.5);  // changes the tensor softplus saved for its backward
      out.sum().backward();
    } catch (const Error& error) {
      fmt::print("   the saved input changed in place before backward:\n     {}\n", error.what());
    }

    if (test_accuracy < 0.9) {
      fmt::print(stderr, "error: test accuracy {:.1f}% is below 90%; try more --steps\n", 100 * test_accuracy);
      return 1;
    }
    return 0;
  });
}
