// Worked example 9, "Second-order": what differentiating a gradient buys. A Hessian-vector
// product checked against the full Hessian; Newton's method against gradient descent; and
// MAML (Finn et al., 2017) on sine-wave regression, which meta-trains through the network's
// own gradient steps.
//
//   ./build/examples/second_order [--meta-steps N] [--seed S] [--out DIR]
//
// Writes DIR/maml_sine.svg: an unseen sine, its 10 points, and what a few gradient steps on those
// points make of the meta-trained network and of the same network pre-trained on all tasks.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/run_main.h"
#include "ember.h"
#include "nn/train/svg_plot.h"

using namespace ember;

namespace {

using Inputs = std::vector<Tensor>;

// x solved from A x = b by Gaussian elimination with partial pivoting (A small and square).
std::vector<double> solve(std::vector<double> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t row = col + 1; row < n; ++row) {
      if (std::abs(a[row * n + col]) > std::abs(a[pivot * n + col])) pivot = row;
    }
    for (size_t k = 0; k < n; ++k) std::swap(a[col * n + k], a[pivot * n + k]);
    std::swap(b[col], b[pivot]);
    for (size_t row = col + 1; row < n; ++row) {
      const double factor = a[row * n + col] / a[col * n + col];
      for (size_t k = col; k < n; ++k) a[row * n + k] -= factor * a[col * n + k];
      b[row] -= factor * b[col];
    }
  }
  std::vector<double> x(n);
  for (size_t i = n; i-- > 0;) {
    double sum = b[i];
    for (size_t k = i + 1; k < n; ++k) sum -= a[i * n + k] * x[k];
    x[i] = sum / a[i * n + i];
  }
  return x;
}

// --- MAML on sine waves -----------------------------------------------------------------------
// A task is y = amplitude sin(x - phase), amplitude in [0.1, 5], phase in [0, pi], x in [-5, 5],
// as in the paper. The network is 1-40-40-1 with ReLUs. Every task of a batch runs at once:
// the weights get a leading task dim ([tasks, in, out], expanded from the shared ones), so each
// task can take gradient steps of its own and the batch stays a few batched products.

struct SineTasks {
  Tensor amplitude, phase;  // [tasks, 1, 1]
  static SineTasks sample(int64_t tasks) {
    return {add(mul(rand({tasks, 1, 1}), 4.9), 0.1), mul(rand({tasks, 1, 1}), std::numbers::pi)};
  }
  // Points x uniform in [-5, 5] ([tasks, count, 1]) and their values.
  std::pair<Tensor, Tensor> draw(int64_t count) const {
    const Tensor x = sub(mul(rand({amplitude.size(0), count, 1}), 10.0), 5.0);
    return {x, values(x)};
  }
  Tensor values(const Tensor& x) const { return mul(amplitude, sin(sub(x, phase))); }
};

struct SineNetwork {
  std::vector<Tensor> parameters;  // weight [in, out] and bias [1, out] of three layers

  SineNetwork() {
    const std::vector<std::pair<int64_t, int64_t>> layers{{1, 40}, {40, 40}, {40, 1}};
    for (const auto& [in, out] : layers) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      parameters.push_back(sub(mul(rand({in, out}), 2 * bound), bound).detach().requires_grad_());
      parameters.push_back(sub(mul(rand({1, out}), 2 * bound), bound).detach().requires_grad_());
    }
  }

  // The shared parameters with a task dim of `tasks`: each task's copy can then move on its own.
  std::vector<Tensor> per_task(int64_t tasks) const {
    std::vector<Tensor> copies;
    for (const Tensor& p : parameters) copies.push_back(expand(unsqueeze(p, 0), {tasks, p.size(0), p.size(1)}));
    return copies;
  }
};

// y [tasks, points, 1] for x [tasks, points, 1] under per-task parameters.
Tensor predict(const std::vector<Tensor>& p, const Tensor& x) {
  Tensor h = relu(add(bmm(x, p[0]), p[1]));
  h = relu(add(bmm(h, p[2]), p[3]));
  return add(bmm(h, p[4]), p[5]);
}

// The sum over tasks of each task's mean squared error: its gradient with respect to a task's
// parameters is that task's own gradient.
Tensor summed_task_losses(const std::vector<Tensor>& p, const Tensor& x, const Tensor& y) {
  const Tensor error = sub(predict(p, x), y);
  return div(sum(mul(error, error)), static_cast<double>(x.size(1)));
}

// `steps` gradient steps of size `rate` on each task's points. With create_graph the steps are
// recorded, so the adapted parameters stay differentiable with respect to where they started.
std::vector<Tensor> adapt(std::vector<Tensor> p, const Tensor& x, const Tensor& y, int steps, double rate,
                          bool create_graph) {
  for (int step = 0; step < steps; ++step) {
    const std::vector<Tensor> gradients =
        autograd::grad({summed_task_losses(p, x, y)}, p, {}, {.create_graph = create_graph});
    for (size_t i = 0; i < p.size(); ++i) p[i] = sub(p[i], mul(gradients[i], rate));
  }
  return p;
}

struct Adam {
  std::vector<Tensor> parameters, first, second;
  double rate;
  int steps = 0;
  Adam(std::vector<Tensor> params, double learning_rate) : parameters(std::move(params)), rate(learning_rate) {
    for (const Tensor& p : parameters) {
      first.push_back(zeros_like(p));
      second.push_back(zeros_like(p));
    }
  }
  void step() {
    NoGradGuard no_grad;
    ++steps;
    const double c1 = 1 - std::pow(0.9, steps), c2 = 1 - std::pow(0.999, steps);
    for (size_t i = 0; i < parameters.size(); ++i) {
      Tensor& grad = parameters[i].mutable_grad();
      first[i].mul_(0.9).add_(grad, 0.1);
      second[i].mul_(0.999).add_(mul(grad, grad), 0.001);
      parameters[i].add_(div(first[i], add(sqrt(div(second[i], c2)), 1e-8)), -rate / c1);
      grad = Tensor();
    }
  }
};

constexpr int64_t kShots = 10;        // points seen of each task
constexpr double kInnerRate = 0.01;   // the paper's step size for the inner steps
constexpr int kTrainInnerSteps = 1;   // inner steps meta-trained through
constexpr int kTestSteps = 5;         // steps an unseen task gets


}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Second derivatives: Hessian-vector products, Newton's method, and MAML on sine waves"};
  examples::CommonOptions common{.out_dir = "out/second_order"};
  int meta_steps = 20000;
  int64_t task_batch = 25;
  app.add_option("--meta-steps", meta_steps, "MAML's outer steps (and the pre-trained network's steps)")
      ->check(examples::at_least(1))
      ->capture_default_str();
  app.add_option("--task-batch", task_batch, "tasks per outer step")->check(examples::at_least(1))->capture_default_str();
  examples::add_common_options(app, common);

  return examples::run_main(app, argc, argv, common, [&] {
    examples::setup_run(common);

    fmt::print("\n1. a Hessian-vector product, checked against the whole Hessian\n");
    {
      // f(x) = sum(tanh(A x)^2) + sum(x^4) / 4, x [6]: its Hessian is dense.
      const Tensor a = randn({6, 6}, kFloat64);
      auto f = [&](const Inputs& in) {
        const Tensor t = tanh(matmul(a, in[0]));
        return add(sum(mul(t, t)), div(sum(pow(in[0], 4.0)), 4.0));
      };
      const Tensor x = randn({6}, kFloat64), v = randn({6}, kFloat64);
      const Tensor hessian = autograd::hessian(f, {x})[0][0];  // 6 backward passes, one per row
      const Tensor product = autograd::hvp(f, {x}, {v}).derivatives[0];  // two passes, no matrix
      fmt::print("   f(x) = sum(tanh(A x)^2) + sum(x^4)/4 with x [6]; Hessian [{}]\n", fmt::join(hessian.sizes(), ", "));
      fmt::print("   hvp(f, x, v)  = [{:.6f}]\n", fmt::join(product.to_vector<double>(), ", "));
      fmt::print("   hessian(f) v  = [{:.6f}]\n", fmt::join(matmul(hessian, v).to_vector<double>(), ", "));
      fmt::print("   largest difference {:.2e}; the Hessian's largest asymmetry {:.2e}\n",
                 max(abs(sub(product, matmul(hessian, v)))).item<double>(),
                 max(abs(sub(hessian, t(hessian)))).item<double>());
    }

    fmt::print("\n2. Newton's method against gradient descent: logistic regression, 2 features and a bias\n");
    {
      // Two overlapping classes; the loss is the mean log loss plus 0.01 |w|^2 (strictly convex).
      const int64_t n = 200;
      const Tensor labels = gt(rand({n}, kFloat64), 0.5).to(kFloat64);
      const Tensor centers = sub(mul(labels, 2.0), 1.0).unsqueeze(1);  // -1 or +1
      const Tensor features = cat({add(mul(randn({n, 2}, kFloat64), 1.0), mul(centers, tensor({1.5, -0.5}, {2}, kFloat64))),
                                   ones({n, 1}, kFloat64)},
                                  1);
      auto loss = [&](const Inputs& in) {
        const Tensor logits = matmul(features, in[0]);
        const Tensor log_loss = sub(logsumexp(stack({zeros_like(logits), logits}, 1), {1}), mul(labels, logits));
        return add(mean(log_loss), mul(sum(mul(in[0], in[0])), 0.01));
      };
      Tensor newton = zeros({3}, kFloat64), descent = zeros({3}, kFloat64);
      fmt::print("   step   Newton loss   gradient descent loss (rate 1)\n");
      for (int step = 0; step <= 6; ++step) {
        fmt::print("   {:>4}   {:.10f}  {:.10f}\n", step, loss({newton}).item<double>(), loss({descent}).item<double>());
        // Newton: solve H d = g and step by d. Gradient descent: step by the gradient.
        const Tensor gradient = autograd::vjp(loss, {newton}).derivatives[0];
        const Tensor hessian = autograd::hessian(loss, {newton})[0][0];
        const std::vector<double> direction = solve(hessian.to_vector<double>(), gradient.to_vector<double>());
        newton = sub(newton, tensor(direction, {3}, kFloat64));
        descent = sub(descent, autograd::vjp(loss, {descent}).derivatives[0]);
      }
      for (int step = 7; step < 200; ++step) descent = sub(descent, autograd::vjp(loss, {descent}).derivatives[0]);
      fmt::print("   after 200 steps gradient descent reaches {:.10f}; Newton had it in about 4\n",
                 loss({descent}).item<double>());
    }

    fmt::print("\n3. MAML on sine waves: meta-training through the inner gradient steps\n");
    SineNetwork maml, pretrained;
    Adam maml_optimizer(maml.parameters, 1e-3), pretrained_optimizer(pretrained.parameters, 1e-3);
    fmt::print("   {} outer steps of {} tasks; each task: {} points to adapt on ({} step of {}), {} to score\n",
               meta_steps, task_batch, kShots, kTrainInnerSteps, kInnerRate, kShots);
    for (int step = 1; step <= meta_steps; ++step) {
      const SineTasks tasks = SineTasks::sample(task_batch);
      const auto [support_x, support_y] = tasks.draw(kShots);
      const auto [query_x, query_y] = tasks.draw(kShots);
      // MAML: adapt each task's copy on its support points (recording the step), score the
      // adapted copy on fresh points, and differentiate that through the step into the start.
      const std::vector<Tensor> adapted =
          adapt(maml.per_task(task_batch), support_x, support_y, kTrainInnerSteps, kInnerRate, /*create_graph=*/true);
      const Tensor meta_loss = div(summed_task_losses(adapted, query_x, query_y), static_cast<double>(task_batch));
      meta_loss.backward();
      maml_optimizer.step();
      // The baseline: the same network trained on the same points of all the tasks jointly.
      const Tensor joint_loss =
          div(summed_task_losses(pretrained.per_task(task_batch), cat({support_x, query_x}, 1),
                                 cat({support_y, query_y}, 1)),
              static_cast<double>(task_batch));
      joint_loss.backward();
      pretrained_optimizer.step();
      if (step % std::max(1, meta_steps / 6) == 0 || step == meta_steps) {
        fmt::print("   step {:>5}: MAML's loss after adapting {:.3f}   pre-trained's loss {:.3f}\n", step,
                   meta_loss.item<double>(), joint_loss.item<double>());
      }
    }

    fmt::print("\n4. 100 unseen sines: {} points each, {} gradient steps of {}, then the error on [-5, 5]\n", kShots,
               kTestSteps, kInnerRate);
    manual_seed(common.seed + 1000);  // the held-out tasks: the same for every run of a seed
    const int64_t held_out = 100;
    const SineTasks tasks = SineTasks::sample(held_out);
    const auto [support_x, support_y] = tasks.draw(kShots);
    // 100 evenly spaced points of [-5, 5], the same for every task.
    const Tensor grid = expand(unsqueeze(sub(mul(arange(100.0), 10.0 / 99.0), 5.0).unsqueeze(1), 0), {held_out, 100, 1});
    const Tensor truth = tasks.values(grid);
    auto error_after = [&](const SineNetwork& network, int steps) {
      const std::vector<Tensor> adapted =
          adapt(network.per_task(held_out), support_x, support_y, steps, kInnerRate, /*create_graph=*/false);
      NoGradGuard no_grad;
      const Tensor error = sub(predict(adapted, grid), truth);
      return mean(mul(error, error)).item<double>();
    };
    fmt::print("   steps   MAML's mean squared error   pre-trained's\n");
    for (const int steps : {0, 1, kTestSteps, 10}) {
      fmt::print("   {:>5}   {:>25.3f}   {:>13.3f}\n", steps, error_after(maml, steps), error_after(pretrained, steps));
    }
    const double maml_error = error_after(maml, kTestSteps), pretrained_error = error_after(pretrained, kTestSteps);
    fmt::print("   after {} steps MAML's error is {:.2f} of the pre-trained network's\n", kTestSteps,
               maml_error / pretrained_error);

    fmt::print("\n5. one unseen sine, plotted\n");
    {
      // Task 0 of the held-out ones: its curve, its 10 points, and both networks after the steps.
      const Tensor x = grid.narrow(0, 0, 1), x_points = support_x.narrow(0, 0, 1);
      auto curve_of = [&](const std::string& name, const SineNetwork* network, int steps) {
        Tensor y = truth.narrow(0, 0, 1);
        if (network != nullptr) {
          std::vector<Tensor> p = network->per_task(1);
          p = adapt(p, x_points, support_y.narrow(0, 0, 1), steps, kInnerRate, false);
          NoGradGuard no_grad;
          y = predict(p, x);
        }
        return train::Curve{name, x.contiguous().to_vector<double>(), y.detach().contiguous().to_vector<double>()};
      };
      // The points, in order of x, drawn as a line through them.
      std::vector<std::pair<double, double>> points;
      const std::vector<double> px = x_points.contiguous().to_vector<double>();
      const std::vector<double> py = support_y.narrow(0, 0, 1).contiguous().to_vector<double>();
      for (size_t i = 0; i < px.size(); ++i) points.emplace_back(px[i], py[i]);
      std::sort(points.begin(), points.end());
      train::Curve shots{fmt::format("the {} points seen", kShots), {}, {}};
      for (const auto& [px_i, py_i] : points) {
        shots.x.push_back(px_i);
        shots.y.push_back(py_i);
      }
      const std::string path = common.out_path("maml_sine.svg");
      train::write_curves_svg(path,
                              {{"y",
                                {curve_of("the sine", nullptr, 0), shots,
                                 curve_of(fmt::format("MAML, after {} steps", kTestSteps), &maml, kTestSteps),
                                 curve_of(fmt::format("pre-trained, after {} steps", kTestSteps), &pretrained, kTestSteps),
                                 curve_of("MAML, before adapting", &maml, 0)}}},
                              "an unseen sine: MAML's start adapts in a few steps, the pre-trained network's does not",
                              "x");
      fmt::print("   wrote {}\n", path);
    }
    return 0;
  });
}
