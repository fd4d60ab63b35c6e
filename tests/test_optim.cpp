// Optimizers, LR schedules and gradient clipping: updates against plain-double references of
// PyTorch's documented rules, parameter groups, state dicts, schedules, clipping and errors.
#include <cmath>
#include <limits>
#include <numbers>

#include "helpers.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip_grad.h"
#include "nn/optim/lr_schedule.h"
#include "nn/modules/module.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/sgd.h"

using namespace ember;
using namespace ember::testing;

namespace {

// loss(w) = sum_i a_i w_i^2 + c_i w_i, so dloss/dw_i = 2 a_i w_i + c_i: gradients a reference
// can compute without autograd.
struct Quadratic {
  std::vector<double> a, c;
  Tensor loss(const Tensor& w) const {
    const Shape shape{static_cast<int64_t>(a.size())};
    return sum(add(mul(mul(w, w), tensor<double>(a, shape)), mul(w, tensor<double>(c, shape))));
  }
  std::vector<double> grad(const std::vector<double>& w) const {
    std::vector<double> g(w.size());
    for (size_t i = 0; i < w.size(); ++i) g[i] = 2 * a[i] * w[i] + c[i];
    return g;
  }
};

const Quadratic kProblem{{0.5, 1.5, 2.0}, {-1.0, 0.25, 3.0}};
const std::vector<double> kStart = {1.0, -2.0, 0.5};

Tensor parameter(const std::vector<double>& values) {
  Tensor p = tensor<double>(values, Shape{static_cast<int64_t>(values.size())});
  p.requires_grad_(true);
  return p;
}

// torch.optim.SGD's documented update, in doubles.
struct SgdReference {
  double lr, momentum = 0, dampening = 0;
  bool nesterov = false;
  double weight_decay = 0;
  std::vector<double> buffer = {};

  void step(std::vector<double>& w, std::vector<double> g) {
    for (size_t i = 0; i < w.size(); ++i) g[i] += weight_decay * w[i];
    if (momentum != 0) {
      if (buffer.empty()) {
        buffer = g;
      } else {
        for (size_t i = 0; i < w.size(); ++i) buffer[i] = momentum * buffer[i] + (1 - dampening) * g[i];
      }
      for (size_t i = 0; i < w.size(); ++i) g[i] = nesterov ? g[i] + momentum * buffer[i] : buffer[i];
    }
    for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * g[i];
  }
};

// torch.optim.Adam's (decoupled: AdamW's) documented update, in doubles.
struct AdamReference {
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;
  std::vector<double> m = {}, v = {};
  int t = 0;

  void step(std::vector<double>& w, std::vector<double> g) {
    if (m.empty()) m.assign(w.size(), 0.0), v.assign(w.size(), 0.0);
    ++t;
    for (size_t i = 0; i < w.size(); ++i) {
      if (decoupled) {
        w[i] *= 1 - lr * weight_decay;
      } else {
        g[i] += weight_decay * w[i];
      }
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(beta1, t));
      const double v_hat = v[i] / (1 - std::pow(beta2, t));
      w[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

// Three steps of `optimizer` on kProblem against three steps of the reference.
template <class Reference>
void check_three_steps(nn::Optimizer& optimizer, const Tensor& w, Reference reference) {
  std::vector<double> expected = kStart;
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    kProblem.loss(w).backward();
    optimizer.step();
    reference.step(expected, kProblem.grad(expected));
    INFO("step " << step);
    check_close(w, tensor<double>(expected, {3}), 1e-13, 1e-12);
  }
}

}  // namespace

TEST_CASE("SGD's first three steps follow PyTorch's rule") {
  SUBCASE("plain") {
    Tensor w = parameter(kStart);
    nn::SGD optimizer({w}, {.lr = 0.1});
    check_three_steps(optimizer, w, SgdReference{.lr = 0.1});
  }
  SUBCASE("momentum and weight decay") {
    Tensor w = parameter(kStart);
    nn::SGD optimizer({w}, {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.1});
    check_three_steps(optimizer, w, SgdReference{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.1});
  }
  SUBCASE("dampening") {
    Tensor w = parameter(kStart);
    nn::SGD optimizer({w}, {.lr = 0.05, .momentum = 0.8, .dampening = 0.5});
    check_three_steps(optimizer, w, SgdReference{.lr = 0.05, .momentum = 0.8, .dampening = 0.5});
  }
  SUBCASE("nesterov") {
    Tensor w = parameter(kStart);
    nn::SGD optimizer({w}, {.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
    check_three_steps(optimizer, w,
                      SgdReference{.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
  }
}

TEST_CASE("Adam's and AdamW's first three steps follow PyTorch's rules") {
  SUBCASE("Adam") {
    Tensor w = parameter(kStart);
    nn::Adam optimizer({w}, {.lr = 0.1});
    check_three_steps(optimizer, w, AdamReference{.lr = 0.1});
  }
  SUBCASE("Adam with betas, eps and coupled weight decay") {
    Tensor w = parameter(kStart);
    nn::Adam optimizer({w}, {.lr = 0.02, .betas = {0.8, 0.95}, .eps = 1e-3, .weight_decay = 0.3});
    check_three_steps(optimizer, w,
                      AdamReference{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-3, .weight_decay = 0.3});
  }
  SUBCASE("AdamW: decoupled weight decay, 0.01 by default") {
    Tensor w = parameter(kStart);
    nn::AdamW optimizer({w}, {.lr = 0.1});
    CHECK(optimizer.option(0, "weight_decay") == 0.01);
    check_three_steps(optimizer, w, AdamReference{.lr = 0.1, .weight_decay = 0.01, .decoupled = true});
  }
  SUBCASE("AdamW with a large decay differs from Adam's coupled decay") {
    Tensor w = parameter(kStart);
    nn::AdamW optimizer({w}, {.lr = 0.05, .betas = {0.85, 0.99}, .weight_decay = 0.5});
    check_three_steps(optimizer, w,
                      AdamReference{.lr = 0.05, .beta1 = 0.85, .beta2 = 0.99, .weight_decay = 0.5, .decoupled = true});
  }
}

TEST_CASE("float32 parameters follow the reference to float precision") {
  Tensor w = tensor<double>(kStart, {3}, kFloat32);
  w.requires_grad_(true);
  nn::Adam optimizer({w}, {.lr = 0.1, .weight_decay = 0.1});
  AdamReference reference{.lr = 0.1, .weight_decay = 0.1};
  std::vector<double> expected = kStart;
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    kProblem.loss(w.to(kFloat64)).backward();
    optimizer.step();
    reference.step(expected, kProblem.grad(expected));
  }
  check_close(w, tensor<double>(expected, {3}), 1e-5, 1e-5);
}

TEST_CASE("AdamW's fused step and its op-by-op form (non-contiguous parameters) agree") {
  // The same values as a contiguous parameter and as a transposed view of a leaf: the CPU step
  // takes the fused loop for the first and the ops for the second.
  const Tensor start = randn({6, 4}, kFloat64);
  Tensor contiguous_w = start.clone().requires_grad_();
  Tensor strided_w = start.t().contiguous().t().detach().requires_grad_();
  REQUIRE_FALSE(strided_w.is_contiguous());
  nn::AdamW fused({contiguous_w}, {.lr = 0.05, .weight_decay = 0.1});
  nn::AdamW with_ops({strided_w}, {.lr = 0.05, .weight_decay = 0.1});
  const Tensor target = randn({6, 4}, kFloat64);
  for (int step = 0; step < 3; ++step) {
    for (auto [w, optimizer] : {std::pair{&contiguous_w, &fused}, std::pair{&strided_w, &with_ops}}) {
      optimizer->zero_grad();
      mul(sub(*w, target), sub(*w, target)).sum().backward();
      optimizer->step();
    }
  }
  check_close(strided_w, contiguous_w, 1e-14, 1e-12);
}

TEST_CASE("parameter groups keep their own learning rate and weight decay") {
  Tensor first = parameter(kStart), second = parameter(kStart);
  nn::Adam optimizer({nn::ParamGroup{{first}, {{"lr", 0.1}}},
                      nn::ParamGroup{{second}, {{"lr", 0.01}, {"weight_decay", 0.5}, {"beta1", 0.5}}}},
                     {.weight_decay = 0.0});
  CHECK(optimizer.num_groups() == 2);
  CHECK(optimizer.lr(0) == 0.1);
  CHECK(optimizer.lr(1) == 0.01);
  CHECK(optimizer.option(0, "beta1") == 0.9);
  AdamReference reference_first{.lr = 0.1}, reference_second{.lr = 0.01, .beta1 = 0.5, .weight_decay = 0.5};
  std::vector<double> expected_first = kStart, expected_second = kStart;
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    add(kProblem.loss(first), kProblem.loss(second)).backward();
    optimizer.step();
    reference_first.step(expected_first, kProblem.grad(expected_first));
    reference_second.step(expected_second, kProblem.grad(expected_second));
  }
  check_close(first, tensor<double>(expected_first, {3}), 1e-13, 1e-12);
  check_close(second, tensor<double>(expected_second, {3}), 1e-13, 1e-12);

  // set_lr changes one group only.
  optimizer.set_lr(1, 0.5);
  CHECK(optimizer.lr(0) == 0.1);
  CHECK(optimizer.lr(1) == 0.5);
}

TEST_CASE("parameters without a gradient are skipped; zero_grad drops gradients") {
  Tensor used = parameter(kStart), unused = parameter({4.0, 5.0});
  nn::SGD optimizer({used, unused}, {.lr = 0.1, .momentum = 0.9});
  kProblem.loss(used).backward();
  optimizer.step();
  check_close(unused, tensor<double>({4.0, 5.0}, {2}), 0, 0);
  const nn::StateDict state = optimizer.state_dict();
  CHECK(state.contains("state.0.momentum_buffer"));
  CHECK_FALSE(state.contains("state.1.momentum_buffer"));
  CHECK(used.grad().defined());
  optimizer.zero_grad();
  CHECK_FALSE(used.grad().defined());
  const std::vector<double> before = used.to_vector<double>();
  optimizer.step();  // no gradients at all: nothing moves
  CHECK(used.to_vector<double>() == before);
}

namespace {

class Block : public nn::Module {
 public:
  Block() : Module("Block") {
    register_parameter("weight", randn({2, 3}));
    register_parameter("bias", zeros({2}));
  }
};

class Net : public nn::Module {
 public:
  Net() : Module("Net") {
    register_module("proj", std::make_shared<Block>());
    register_parameter("scale", ones({3}));      // rank 1, like a LayerNorm weight
    register_parameter("bias_matrix", zeros({2, 2}));  // a name with "bias": not decayed
    register_parameter("table", randn({4, 3}));
  }
};

}  // namespace

TEST_CASE("weight_decay_groups puts biases and rank-1 parameters in a group without decay") {
  Net net;
  const std::vector<nn::ParamGroup> groups = nn::weight_decay_groups(net, 0.1);
  REQUIRE(groups.size() == 2);
  auto names_of = [&](const nn::ParamGroup& group) {
    std::vector<std::string> names;
    for (const Tensor& p : group.params) {
      for (const auto& [name, q] : net.named_parameters()) {
        if (q.impl() == p.impl()) names.push_back(name);
      }
    }
    return names;
  };
  CHECK(names_of(groups[0]) == std::vector<std::string>{"table", "proj.weight"});
  CHECK(names_of(groups[1]) == std::vector<std::string>{"scale", "bias_matrix", "proj.bias"});
  nn::AdamW optimizer(groups, {.lr = 1e-3});
  CHECK(optimizer.option(0, "weight_decay") == 0.1);
  CHECK(optimizer.option(1, "weight_decay") == 0.0);
}

namespace {

// Runs 3 steps of an optimizer made by make(params, lr), saves its state, makes a fresh
// optimizer (with another lr, which loading must restore) over fresh copies of the parameters,
// loads, and checks that 2 more steps of each give bit-identical parameters.
template <class Make>
void check_round_trip(Make make) {
  manual_seed(7);
  const Tensor x = randn({5, 3}), y = randn({5, 2});
  auto make_leaf = [](const Tensor& value) {
    Tensor p = value.detach().clone();
    p.requires_grad_(true);
    return p;
  };
  std::vector<Tensor> params = {make_leaf(randn({3, 2})), make_leaf(randn({2})), make_leaf(randn({2}))};
  // params[2] never gets a gradient, so it has no state.
  auto train = [&](nn::Optimizer& optimizer, const std::vector<Tensor>& p, int steps) {
    for (int s = 0; s < steps; ++s) {
      optimizer.zero_grad();
      const Tensor error = sub(add(matmul(x, p[0]), p[1]), y);
      mean(mul(error, error)).backward();
      optimizer.step();
    }
  };
  const std::unique_ptr<nn::Optimizer> original = make(params, 0.01);
  train(*original, params, 3);
  const nn::StateDict saved = original->state_dict();

  std::vector<Tensor> copies;
  for (const Tensor& p : params) copies.push_back(make_leaf(p));
  std::unique_ptr<nn::Optimizer> restored = make(copies, 0.5);
  restored->load_state_dict(saved);
  CHECK(restored->lr(0) == 0.01);
  train(*original, params, 2);
  train(*restored, copies, 2);
  for (size_t i = 0; i < params.size(); ++i) CHECK(params[i].to_vector<float>() == copies[i].to_vector<float>());
  // The saved dict is a snapshot: two more steps did not change it.
  const nn::StateDict later = original->state_dict();
  for (const auto& [key, value] : later) {
    if (!key.starts_with("state.0.")) continue;
    const Tensor& before = saved.at(key);
    const Tensor& after = value;
    CHECK(before.to_vector<double>() != after.to_vector<double>());
  }
}

}  // namespace

TEST_CASE("a state dict restores an optimizer exactly") {
  SUBCASE("SGD with nesterov momentum") {
    check_round_trip([](std::vector<Tensor> p, double lr) {
      return std::make_unique<nn::SGD>(p, nn::SGDOptions{.lr = lr, .momentum = 0.9, .nesterov = true});
    });
  }
  SUBCASE("Adam") {
    check_round_trip([](std::vector<Tensor> p, double lr) {
      return std::make_unique<nn::Adam>(p, nn::AdamOptions{.lr = lr, .weight_decay = 0.01});
    });
  }
  SUBCASE("AdamW with two groups") {
    check_round_trip([](std::vector<Tensor> p, double lr) {
      return std::make_unique<nn::AdamW>(
          std::vector<nn::ParamGroup>{{{p[0]}, {}}, {{p[1], p[2]}, {{"weight_decay", 0.0}}}},
          nn::AdamWOptions{.lr = lr});
    });
  }
}

TEST_CASE("the state dict's layout: type, group hyper-parameters as 0-d float64, per-parameter state") {
  Tensor w = parameter(kStart), unused = parameter({1.0});
  nn::Adam optimizer({nn::ParamGroup{{w}, {}}, nn::ParamGroup{{unused}, {{"lr", 0.5}}}}, {.lr = 0.1});
  for (int s = 0; s < 3; ++s) {
    optimizer.zero_grad();
    kProblem.loss(w).backward();
    optimizer.step();
  }
  const nn::StateDict state = optimizer.state_dict();
  CHECK(state.contains("type.Adam"));
  CHECK(state.at("param_groups.0.lr").dim() == 0);
  CHECK(state.at("param_groups.0.lr").dtype() == kFloat64);
  CHECK(state.at("param_groups.0.lr").item() == 0.1);
  CHECK(state.at("param_groups.1.lr").item() == 0.5);
  CHECK(state.at("param_groups.0.beta2").item() == 0.999);
  CHECK(state.at("param_groups.1.params").to_vector<int64_t>() == std::vector<int64_t>{1});
  CHECK(state.at("state.0.step").item() == 3.0);
  CHECK(state.at("state.0.exp_avg").sizes() == Shape{3});
  CHECK(state.at("state.0.exp_avg_sq").sizes() == Shape{3});
  CHECK_FALSE(state.contains("state.1.step"));
}

TEST_CASE("Adam fits y = 2x + 1") {
  manual_seed(0);
  Tensor weight = zeros({1, 1}), bias = zeros({1});
  weight.requires_grad_(true);
  bias.requires_grad_(true);
  const Tensor x = reshape(arange(-1.0, 1.0, 0.1), {-1, 1});
  const Tensor y = add(mul(x, 2.0), 1.0);
  nn::Adam optimizer({weight, bias}, {.lr = 0.1});
  double loss_value = 0;
  for (int step = 0; step < 300; ++step) {
    optimizer.zero_grad();
    const Tensor error = sub(add(matmul(x, weight.t()), bias), y);
    const Tensor loss = mean(mul(error, error));
    loss.backward();
    optimizer.step();
    loss_value = loss.item();
  }
  CHECK(loss_value < 1e-4);
  CHECK(weight.item() == doctest::Approx(2.0).epsilon(1e-2));
  CHECK(bias.item() == doctest::Approx(1.0).epsilon(1e-2));
}

TEST_CASE("optimizer errors name what is wrong") {
  Tensor w = parameter(kStart);
  CHECK_THROWS_WITH_ALL(nn::SGD({w}, {.lr = -0.1}), "SGD", "lr must be >= 0", "-0.1");
  CHECK_THROWS_WITH_ALL(nn::Adam({w}, {.lr = -1.0}), "Adam", "lr must be >= 0");
  CHECK_THROWS_WITH_ALL(nn::Adam({w}, {.betas = {0.9, 1.0}}), "Adam", "beta2 must be in [0, 1)", "got 1");
  CHECK_THROWS_WITH_ALL(nn::AdamW({w}, {.betas = {-0.1, 0.9}}), "AdamW", "beta1 must be in [0, 1)", "-0.1");
  CHECK_THROWS_WITH_ALL(nn::Adam({w}, {.eps = -1e-8}), "Adam", "eps must be >= 0");
  CHECK_THROWS_WITH_ALL(nn::SGD({w}, {.nesterov = true}), "SGD", "nesterov", "momentum > 0");
  CHECK_THROWS_WITH_ALL(nn::SGD(std::vector<nn::ParamGroup>{{{w}, {{"momentun", 0.9}}}}), "SGD",
                        "parameter group 0 sets 'momentun'");
  CHECK_THROWS_WITH_ALL(nn::SGD(std::vector<Tensor>{}), "SGD", "no parameters");
  CHECK_THROWS_WITH_ALL(nn::SGD({w, w}), "SGD", "appears more than once");
  CHECK_THROWS_WITH_ALL(nn::SGD({mul(w, 2.0)}), "SGD", "not a leaf");
  CHECK_THROWS_WITH_ALL(nn::SGD({zeros({2}, kInt64)}), "SGD", "int64", "floating point");

  nn::Adam adam({w});
  CHECK_THROWS_WITH_ALL(adam.set_lr(0, -1.0), "Adam", "lr must be >= 0", "parameter group 0");
  CHECK_THROWS_WITH_ALL(adam.set_lr(3, 0.1), "Adam", "group index 3", "1 groups");
  CHECK_THROWS_WITH_ALL(adam.option(0, "momentum"), "Adam", "'momentum' is not a hyper-parameter");
}

TEST_CASE("load_state_dict refuses another optimizer's state and names what differs") {
  Tensor w = parameter(kStart), v = parameter({1.0, 2.0});
  nn::SGD sgd({w, v}, {.lr = 0.1, .momentum = 0.9});
  kProblem.loss(w).backward();
  sgd.step();
  nn::Adam adam({parameter(kStart), parameter({1.0, 2.0})});
  CHECK_THROWS_WITH_ALL(adam.load_state_dict(sgd.state_dict()), "Adam.load_state_dict", "saved by SGD, not Adam");
  nn::AdamW adamw({parameter(kStart), parameter({1.0, 2.0})});
  CHECK_THROWS_WITH_ALL(adamw.load_state_dict(adam.state_dict()), "saved by Adam, not AdamW");

  nn::SGD fewer({parameter(kStart)});
  CHECK_THROWS_WITH_ALL(fewer.load_state_dict(sgd.state_dict()), "SGD.load_state_dict",
                        "parameter group 0 has 2 parameters in the state dict but 1 in this optimizer");
  nn::SGD two_groups(std::vector<nn::ParamGroup>{{{parameter(kStart)}, {}}, {{parameter({1.0, 2.0})}, {}}});
  CHECK_THROWS_WITH_ALL(two_groups.load_state_dict(sgd.state_dict()), "1 parameter groups", "this optimizer has 2");
  nn::SGD other_shapes({parameter({1.0, 2.0}), parameter(kStart)}, {.momentum = 0.9});
  CHECK_THROWS_WITH_ALL(other_shapes.load_state_dict(sgd.state_dict()), "'state.0.momentum_buffer' has shape [3]",
                        "parameter 0 has shape [2]");

  nn::StateDict stray = sgd.state_dict();
  stray["state.0.exp_avg"] = zeros({3}, kFloat64);
  CHECK_THROWS_WITH_ALL(nn::SGD({parameter(kStart), parameter({1.0, 2.0})}).load_state_dict(stray),
                        "unexpected key 'state.0.exp_avg'", "SGD keeps no 'exp_avg' state");
  nn::StateDict bad_lr = sgd.state_dict();
  bad_lr["param_groups.0.lr"] = scalar_tensor(-1.0, kFloat64);
  nn::SGD target({parameter(kStart), parameter({1.0, 2.0})}, {.lr = 0.3});
  CHECK_THROWS_WITH_ALL(target.load_state_dict(bad_lr), "lr must be >= 0");
  CHECK(target.lr(0) == 0.3);  // a failed load changes nothing
}

TEST_CASE("schedules give their formulas' values") {
  const nn::WarmupLinear linear(0.5, 10, 110);
  CHECK(linear.lr_at(0) == 0.0);
  CHECK(linear.lr_at(5) == doctest::Approx(0.25));
  CHECK(linear.lr_at(10) == doctest::Approx(0.5));
  CHECK(linear.lr_at(60) == doctest::Approx(0.25));
  CHECK(linear.lr_at(109) == doctest::Approx(0.005));
  CHECK(linear.lr_at(110) == 0.0);
  CHECK(linear.lr_at(500) == 0.0);

  const double peak = 1e-3, floor = 1e-5;
  const nn::WarmupCosine cosine(peak, 100, 1100, floor);
  CHECK(cosine.lr_at(50) == doctest::Approx(5e-4));
  CHECK(cosine.lr_at(100) == doctest::Approx(peak));
  CHECK(cosine.lr_at(350) == doctest::Approx(floor + (peak - floor) * 0.5 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(cosine.lr_at(600) == doctest::Approx(floor + (peak - floor) * 0.5));
  CHECK(cosine.lr_at(1100) == doctest::Approx(floor));
  CHECK(cosine.lr_at(5000) == doctest::Approx(floor));
  CHECK(nn::WarmupCosine(1.0, 0, 10).lr_at(0) == 1.0);

  const nn::InverseSqrt noam(512, 4000, 2.0);
  auto formula = [](double step) {
    return 2.0 * std::pow(512.0, -0.5) * std::min(std::pow(step, -0.5), step * std::pow(4000.0, -1.5));
  };
  CHECK(noam.lr_at(0) == doctest::Approx(formula(1)));
  CHECK(noam.lr_at(1) == doctest::Approx(formula(1)));
  CHECK(noam.lr_at(100) == doctest::Approx(formula(100)));
  CHECK(noam.lr_at(4000) == doctest::Approx(formula(4000)));
  CHECK(noam.lr_at(10000) == doctest::Approx(formula(10000)));
  CHECK(noam.lr_at(4000) > noam.lr_at(3000));
  CHECK(noam.lr_at(4000) > noam.lr_at(5000));

  CHECK_THROWS_WITH_ALL(nn::WarmupLinear(0.1, 20, 10), "WarmupLinear", "warmup_steps 20", "total_steps 10");
  CHECK_THROWS_WITH_ALL(nn::WarmupCosine(0.1, 0, 10, 0.5), "WarmupCosine", "min_lr", "0.5");
  CHECK_THROWS_WITH_ALL(nn::InverseSqrt(0, 10), "InverseSqrt", "d_model must be > 0");
  CHECK_THROWS_WITH_ALL(linear.lr_at(-1), "WarmupLinear", "step must be >= 0", "-1");
}

TEST_CASE("Scheduler sets each group's rate every step and restores its step") {
  Tensor w = parameter(kStart), v = parameter({1.0});
  nn::SGD optimizer({nn::ParamGroup{{w}, {}}, nn::ParamGroup{{v}, {}}}, {.lr = 1.0});
  const auto schedule = std::make_shared<nn::WarmupLinear>(0.4, 4, 12);
  nn::Scheduler scheduler(optimizer, schedule);
  CHECK(optimizer.lr(0) == 0.0);
  CHECK(optimizer.lr(1) == 0.0);
  for (int s = 1; s <= 6; ++s) {
    optimizer.step();
    scheduler.step();
    CHECK(scheduler.current_step() == s);
    CHECK(optimizer.lr(0) == schedule->lr_at(s));
    CHECK(optimizer.lr(1) == schedule->lr_at(s));
  }
  const nn::StateDict saved = scheduler.state_dict();
  CHECK(saved.at("step").item<int64_t>() == 6);

  nn::SGD fresh({nn::ParamGroup{{parameter(kStart)}, {}}, nn::ParamGroup{{parameter({1.0})}, {}}});
  const auto slow = std::make_shared<nn::WarmupCosine>(0.01, 0, 12);
  nn::Scheduler per_group(fresh, std::vector<std::shared_ptr<const nn::LRSchedule>>{schedule, slow});
  per_group.load_state_dict(saved);
  CHECK(per_group.current_step() == 6);
  CHECK(fresh.lr(0) == schedule->lr_at(6));
  CHECK(fresh.lr(1) == slow->lr_at(6));

  CHECK_THROWS_WITH_ALL(nn::Scheduler(fresh, std::vector<std::shared_ptr<const nn::LRSchedule>>{schedule}),
                        "Scheduler", "1 schedules", "2 parameter groups");
  CHECK_THROWS_WITH_ALL(per_group.load_state_dict({}), "Scheduler.load_state_dict", "no 'step'");
}

TEST_CASE("clip_grad_norm_ returns the total norm and scales only when it exceeds max_norm") {
  Tensor a = parameter({0.0, 0.0}), b = parameter({0.0, 0.0, 0.0}), no_grad = parameter({1.0});
  auto set_grads = [&] {
    a.mutable_grad() = tensor<double>({3.0, -4.0}, {2});
    b.mutable_grad() = tensor<double>({0.0, 12.0, 0.0}, {3});
  };
  set_grads();
  const std::vector<Tensor> params = {a, b, no_grad};
  // sqrt(9 + 16 + 144) = 13.
  Tensor total = nn::clip_grad_norm_(params, 26.0);
  CHECK(total.dim() == 0);
  CHECK(total.item() == doctest::Approx(13.0));
  check_close(a.grad(), tensor<double>({3.0, -4.0}, {2}), 0, 0);  // 26 > 13: untouched

  total = nn::clip_grad_norm_(params, 6.5);
  CHECK(total.item() == doctest::Approx(13.0));
  const double scale = 6.5 / (13.0 + 1e-6);
  check_close(a.grad(), tensor<double>({3.0 * scale, -4.0 * scale}, {2}), 1e-14, 1e-14);
  check_close(b.grad(), tensor<double>({0.0, 12.0 * scale, 0.0}, {3}), 1e-14, 1e-14);
  CHECK(nn::clip_grad_norm_(params, 100.0).item() == doctest::Approx(6.5).epsilon(1e-6));

  set_grads();
  total = nn::clip_grad_norm_(params, 3.0, std::numeric_limits<double>::infinity());
  CHECK(total.item() == 12.0);
  check_close(b.grad(), tensor<double>({0.0, 12.0 * 3.0 / (12.0 + 1e-6), 0.0}, {3}), 1e-14, 1e-14);

  CHECK(nn::clip_grad_norm_({no_grad}, 1.0).item() == 0.0);
  CHECK_THROWS_WITH_ALL(nn::clip_grad_norm_(params, 1.0, 3.0), "clip_grad_norm_", "norm_type must be 2 or infinity",
                        "got 3");
  CHECK_THROWS_WITH_ALL(nn::clip_grad_norm_(params, -1.0), "clip_grad_norm_", "max_norm must be >= 0");
}
