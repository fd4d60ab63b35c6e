// Optimizer, scheduler and grad scaler state read from a checkpoint is checked before it is
// used: a step count that is not a non-negative integer, a learning rate that is NaN or
// negative, or moment estimates no update could have produced would write NaN into every
// parameter at the next step. Each is refused with its key in the message.
#include <cmath>
#include <limits>

#include "helpers.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// An Adam state dict after one step over a [2] parameter.
nn::StateDict adam_state_after_one_step(nn::Adam& adam, Tensor& weight) {
  weight.mutable_grad() = ones({2});
  adam.step();
  return adam.state_dict();
}

}  // namespace

TEST_CASE("Adam refuses step counts, learning rates and moments no training could have written") {
  Tensor weight = zeros({2}).requires_grad_(true);
  nn::Adam adam({weight}, {.lr = 0.1});
  const nn::StateDict good = adam_state_after_one_step(adam, weight);
  adam.load_state_dict(good);

  const auto with = [&](const std::string& key, const Tensor& value) {
    nn::StateDict state = good;
    state[key] = value;
    return state;
  };
  CHECK_THROWS_WITH_ALL(adam.load_state_dict(with("state.0.step", scalar_tensor(-3.0, kFloat64))), "Adam",
                        "state.0.step", "-3");
  CHECK_THROWS_WITH_ALL(adam.load_state_dict(with("state.0.step", scalar_tensor(kNaN, kFloat64))), "state.0.step");
  CHECK_THROWS_WITH_ALL(adam.load_state_dict(with("state.0.step", scalar_tensor(1.5, kFloat64))), "state.0.step",
                        "1.5");
  CHECK_THROWS_WITH_ALL(adam.load_state_dict(with("param_groups.0.lr", scalar_tensor(kNaN, kFloat64))), "Adam",
                        "lr", "nan");
  CHECK_THROWS_WITH_ALL(adam.load_state_dict(with("param_groups.0.lr", scalar_tensor(-1.0, kFloat64))), "Adam",
                        "lr", "-1");
  CHECK_THROWS_WITH_ALL(adam.load_state_dict(with("state.0.exp_avg_sq", tensor({0.5f, -0.25f}, {2}))), "Adam",
                        "state.0.exp_avg_sq", "negative");
  CHECK_THROWS_WITH_ALL(adam.load_state_dict(with("state.0.exp_avg_sq", tensor({0.5f, NAN}, {2}))),
                        "state.0.exp_avg_sq");
  CHECK_THROWS_WITH_ALL(adam.load_state_dict(with("state.0.exp_avg", tensor({INFINITY, 0.0f}, {2}))),
                        "state.0.exp_avg", "finite");

  // A refused load leaves the optimizer as it was: the next step is finite.
  weight.mutable_grad() = ones({2});
  adam.step();
  for (double v : weight.to_vector<double>()) CHECK(std::isfinite(v));
}

TEST_CASE("SGD refuses a momentum buffer that is not finite") {
  Tensor weight = zeros({2}).requires_grad_(true);
  nn::SGD sgd({weight}, {.lr = 0.1, .momentum = 0.9});
  weight.mutable_grad() = ones({2});
  sgd.step();
  nn::StateDict state = sgd.state_dict();
  state["state.0.momentum_buffer"] = tensor({1.0f, NAN}, {2});
  CHECK_THROWS_WITH_ALL(sgd.load_state_dict(state), "SGD", "state.0.momentum_buffer", "finite");
}

TEST_CASE("Scheduler and GradScaler name the key they refuse") {
  Tensor weight = zeros({2}).requires_grad_(true);
  nn::SGD sgd({weight}, {.lr = 0.1});
  nn::Scheduler scheduler(sgd, std::make_shared<nn::WarmupLinear>(0.1, 10, 100));
  CHECK_THROWS_WITH_ALL(scheduler.load_state_dict({{"step", scalar_tensor(-1.0, kInt64)}}), "Scheduler", "'step'");
  CHECK_THROWS_WITH_ALL(
      scheduler.load_state_dict({{"step", tensor(std::vector<int64_t>{std::numeric_limits<int64_t>::max()}, {})}}),
      "Scheduler", "'step'");

  nn::GradScaler scaler;
  nn::StateDict state = scaler.state_dict();
  state["scale"] = scalar_tensor(kNaN, kFloat64);
  CHECK_THROWS_WITH_ALL(scaler.load_state_dict(state), "GradScaler.load_state_dict", "'scale'");
  state = scaler.state_dict();
  state["growth_factor"] = scalar_tensor(-2.0, kFloat64);
  CHECK_THROWS_WITH_ALL(scaler.load_state_dict(state), "GradScaler.load_state_dict", "'growth_factor'");
}

TEST_CASE("load_checkpoint refuses a crafted optimizer state, naming the file and the key") {
  ScratchDir dir("state_validation");
  nn::Linear model(2, 1);
  nn::Adam adam(model.parameters(), {.lr = 0.01});
  for (Tensor p : model.parameters()) p.mutable_grad() = ones_like(p);
  adam.step();
  const std::string path = dir.file("run.ckpt");
  nn::save_checkpoint(path, model, adam, nullptr, 1);

  nn::StateDict file = nn::load_safetensors(path);
  file["optimizer.state.0.step"] = scalar_tensor(-5.0, kFloat64);
  const std::string crafted = dir.file("crafted.ckpt");
  nn::save_safetensors(crafted, file, {{"format", "ember-checkpoint-1"}});
  CHECK_THROWS_WITH_ALL(nn::load_checkpoint(crafted, model, adam, nullptr), "load_checkpoint", "crafted.ckpt",
                        "state.0.step");
}

TEST_CASE("counters above 2^53 keep every digit through a state dict") {
  const int64_t past_double = (int64_t{1} << 53) + 1;  // the first integer a double cannot hold
  Tensor weight = zeros({2}).requires_grad_(true);
  nn::SGD sgd({weight}, {.lr = 0.1});
  nn::Scheduler scheduler(sgd, std::make_shared<nn::WarmupLinear>(0.1, 10, 100));
  scheduler.load_state_dict({{"step", full_int64({}, past_double)}});
  CHECK(scheduler.current_step() == past_double);
  CHECK(scheduler.state_dict().at("step").item<int64_t>() == past_double);

  // One below INT64_MAX loads, saves and steps once; a step past INT64_MAX is refused.
  const int64_t largest = std::numeric_limits<int64_t>::max();
  scheduler.load_state_dict({{"step", full_int64({}, largest - 1)}});
  CHECK(scheduler.state_dict().at("step").item<int64_t>() == largest - 1);
  scheduler.step();
  CHECK(scheduler.current_step() == largest);
  CHECK_THROWS_WITH_ALL(scheduler.step(), "Scheduler.step", "int64's largest");
  CHECK(scheduler.current_step() == largest);

  nn::GradScaler scaler({.growth_interval = past_double});
  const nn::StateDict state = scaler.state_dict();
  CHECK(state.at("growth_interval").item<int64_t>() == past_double);
  nn::GradScaler resumed;
  resumed.load_state_dict(state);
  CHECK(resumed.state_dict().at("growth_interval").item<int64_t>() == past_double);
}

TEST_CASE("GradScaler's scale stays a finite float32") {
  // PyTorch grows the scale only while the grown value is finite; from 2^127 a doubling would
  // reach float32's inf and skip every later step.
  Tensor weight = ones({2}).requires_grad_(true);
  nn::SGD sgd({weight}, {.lr = 0.1});
  nn::GradScaler scaler({.init_scale = 0x1p127, .growth_interval = 1});
  for (int step = 0; step < 3; ++step) {
    scaler.scale(sum(weight)).backward();
    CHECK(scaler.step(sgd));
    scaler.update();
    sgd.zero_grad();
    CHECK(scaler.scale() == 0x1p127);
  }
  nn::GradScaler resumed;
  resumed.load_state_dict(scaler.state_dict());
  CHECK(resumed.scale() == 0x1p127);
  nn::StateDict too_large = scaler.state_dict();
  too_large["scale"] = scalar_tensor(1e300, kFloat64);
  CHECK_THROWS_WITH_ALL(resumed.load_state_dict(too_large), "GradScaler.load_state_dict", "'scale'", "1e+300");
}
