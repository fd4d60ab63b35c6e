// GradScaler: scaling the loss, unscaling before clipping, skipping a step whose gradients
// overflowed, the scale's backoff and growth, its state dict, and the misuses it refuses; and
// the fused unscale kernel it calls.
#include <filesystem>
#include <limits>
#include <vector>

#include "core/ops/grad_unscale.h"
#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

Tensor parameter(std::initializer_list<float> values) {
  Tensor p = tensor(values);
  p.requires_grad_(true);
  return p;
}

// One iteration: loss = sum(p * factor), scaled, backward, step, update. Returns whether the
// optimizer stepped. factor 1e35 makes the scaled gradient (1e35 * 2^16) overflow float32.
bool iteration(nn::GradScaler& scaler, nn::Optimizer& optimizer, const Tensor& p, double factor) {
  optimizer.zero_grad();
  scaler.scale(sum(mul(p, factor))).backward();
  const bool stepped = scaler.step(optimizer);
  scaler.update();
  return stepped;
}

}  // namespace

TEST_CASE("GradScaler: scale() multiplies the loss by the scale, 2^16 at first, in float32") {
  nn::GradScaler scaler;
  CHECK(scaler.scale() == 65536.0);
  CHECK(scaler.scale(scalar_tensor(3.0)).item() == 3.0 * 65536.0);
  // 2^16 itself does not fit float16 (largest 65504): a 16-bit loss is scaled in float32.
  const Tensor scaled = scaler.scale(scalar_tensor(0.5).to(kFloat16));
  CHECK(scaled.dtype() == kFloat32);
  CHECK(scaled.item() == 32768.0);
}

TEST_CASE("GradScaler: a clean step updates with the true gradients") {
  const Tensor p = parameter({1.0f, -2.0f}), reference = parameter({1.0f, -2.0f});
  nn::SGD optimizer({p}, {.lr = 0.25});
  nn::SGD reference_optimizer({reference}, {.lr = 0.25});
  nn::GradScaler scaler;
  CHECK(iteration(scaler, optimizer, p, 3.0));
  sum(mul(reference, 3.0)).backward();
  reference_optimizer.step();
  // The scale is a power of two: scaling and unscaling are exact, so the updates are equal.
  check_close(p, reference, 0, 0);
  check_close(p, tensor({0.25f, -2.75f}), 0, 0);
}

TEST_CASE("GradScaler: a step whose gradients overflow is skipped and the scale halved") {
  const Tensor p = parameter({1.0f, 2.0f});
  nn::SGD optimizer({p}, {.lr = 0.5});
  nn::GradScaler scaler;
  CHECK_FALSE(iteration(scaler, optimizer, p, 1e35));
  check_close(p, tensor({1.0f, 2.0f}), 0, 0);  // unchanged
  CHECK(scaler.scale() == 32768.0);
  // NaN counts the same as inf.
  CHECK_FALSE(iteration(scaler, optimizer, p, std::numeric_limits<double>::quiet_NaN()));
  CHECK(scaler.scale() == 16384.0);
  check_close(p, tensor({1.0f, 2.0f}), 0, 0);
  // The next clean step goes through.
  CHECK(iteration(scaler, optimizer, p, 1.0));
  check_close(p, tensor({0.5f, 1.5f}), 0, 0);
  CHECK(scaler.scale() == 16384.0);
}

TEST_CASE("GradScaler: the scale grows after growth_interval clean steps in a row") {
  const Tensor p = parameter({1.0f});
  nn::SGD optimizer({p}, {.lr = 0.0});
  nn::GradScaler scaler({.init_scale = 8.0, .growth_factor = 4.0, .backoff_factor = 0.25, .growth_interval = 3});
  CHECK(iteration(scaler, optimizer, p, 1.0));
  CHECK(iteration(scaler, optimizer, p, 1.0));
  CHECK(scaler.scale() == 8.0);
  CHECK(iteration(scaler, optimizer, p, 1.0));
  CHECK(scaler.scale() == 32.0);
  // An overflow resets the count: two clean steps after it are not enough.
  CHECK(iteration(scaler, optimizer, p, 1.0));
  CHECK_FALSE(iteration(scaler, optimizer, p, std::numeric_limits<double>::infinity()));
  CHECK(scaler.scale() == 8.0);
  CHECK(iteration(scaler, optimizer, p, 1.0));
  CHECK(iteration(scaler, optimizer, p, 1.0));
  CHECK(scaler.scale() == 8.0);
  CHECK(iteration(scaler, optimizer, p, 1.0));
  CHECK(scaler.scale() == 32.0);
}

TEST_CASE("GradScaler: unscale_ before clipping, then step does not unscale again") {
  const Tensor p = parameter({0.0f, 0.0f});
  nn::SGD optimizer({p}, {.lr = 1.0});
  nn::GradScaler scaler;
  scaler.scale(sum(mul(p, tensor({3.0f, 4.0f})))).backward();
  check_close(p.grad(), tensor({3.0f * 65536.0f, 4.0f * 65536.0f}), 0, 0);
  scaler.unscale_(optimizer);
  check_close(p.grad(), tensor({3.0f, 4.0f}), 0, 0);
  // The clip sees the true norm, 5, and scales the gradients to norm 1.
  CHECK(nn::clip_grad_norm_({p}, 1.0).item() == doctest::Approx(5.0));
  CHECK(scaler.step(optimizer));
  scaler.update();
  check_close(p, tensor({-0.6f, -0.8f}), 1e-6, 0);
}

TEST_CASE("GradScaler: an overflow found by any optimizer backs the scale off") {
  const Tensor a = parameter({1.0f}), b = parameter({1.0f});
  nn::SGD first({a}, {.lr = 1.0}), second({b}, {.lr = 1.0});
  nn::GradScaler scaler;
  scaler.scale(add(sum(a), sum(mul(b, 1e35)))).backward();
  CHECK(scaler.step(first));
  CHECK_FALSE(scaler.step(second));
  scaler.update();
  CHECK(scaler.scale() == 32768.0);
  check_close(a, tensor({0.0f}), 0, 0);
  check_close(b, tensor({1.0f}), 0, 0);
}

TEST_CASE("GradScaler: the state dict resumes the scale and the growth count") {
  const Tensor p = parameter({1.0f});
  nn::SGD optimizer({p}, {.lr = 0.0});
  nn::GradScaler scaler({.growth_interval = 3});
  CHECK_FALSE(iteration(scaler, optimizer, p, 1e35));
  CHECK(iteration(scaler, optimizer, p, 1.0));
  CHECK(iteration(scaler, optimizer, p, 1.0));
  const nn::StateDict state = scaler.state_dict();
  CHECK(state.at("scale").item() == 32768.0);
  CHECK(state.at("growth_tracker").item<int64_t>() == 2);
  CHECK(state.at("growth_interval").item<int64_t>() == 3);

  nn::GradScaler resumed;  // default options: the state brings its own
  resumed.load_state_dict(state);
  CHECK(resumed.scale() == 32768.0);
  CHECK(iteration(resumed, optimizer, p, 1.0));  // the third clean step in a row
  CHECK(resumed.scale() == 65536.0);
  CHECK(resumed.state_dict().at("growth_factor").item() == 2.0);

  nn::StateDict missing = state;
  missing.erase("growth_tracker");
  CHECK_THROWS_WITH_ALL(resumed.load_state_dict(missing), "GradScaler.load_state_dict", "no 'growth_tracker'");
  nn::StateDict wrong = state;
  wrong["scale"] = scalar_tensor(2.0, kFloat32);
  CHECK_THROWS_WITH_ALL(resumed.load_state_dict(wrong), "GradScaler.load_state_dict", "'scale' must be one float64");
  wrong = state;
  wrong["scale"] = scalar_tensor(-1.0, kFloat64);
  CHECK_THROWS_WITH_ALL(resumed.load_state_dict(wrong), "GradScaler.load_state_dict", "'scale' must be positive");
  wrong = state;
  wrong["growth_tracker"] = scalar_tensor(3.0, kInt64);
  CHECK_THROWS_WITH_ALL(resumed.load_state_dict(wrong), "growth_tracker 3 is not in [0, growth_interval 3)");
  CHECK_THROWS_WITH_ALL(resumed.load_state_dict({}), "the state dict is empty");
  CHECK(resumed.scale() == 65536.0);  // a refused state changes nothing
}

TEST_CASE("GradScaler: a checkpoint keeps the loss scale, and a run may change its precision on resume") {
  const std::string path =
      (std::filesystem::temp_directory_path() / "ember_test_grad_scaler_checkpoint.safetensors").string();
  nn::Linear model(2, 1);
  nn::SGD optimizer(model.parameters(), {.lr = 0.0});
  nn::GradScaler scaler({.growth_interval = 5});
  CHECK_FALSE(iteration(scaler, optimizer, model.weight, 1e35));
  CHECK(iteration(scaler, optimizer, model.weight, 1.0));
  nn::save_checkpoint(path, model, optimizer, nullptr, 2, &scaler);

  nn::GradScaler resumed;
  CHECK(nn::load_checkpoint(path, model, optimizer, nullptr, &resumed) == 2);
  CHECK(resumed.scale() == 32768.0);
  CHECK(resumed.state_dict().at("growth_tracker").item<int64_t>() == 1);
  CHECK(resumed.state_dict().at("growth_interval").item<int64_t>() == 5);
  // Resumed in bf16 (scaler disabled) the saved scale is left unused; a float32 run's
  // checkpoint (no scaler) resumed in fp16 starts the scale afresh.
  nn::GradScaler disabled({.enabled = false});
  CHECK(nn::load_checkpoint(path, model, optimizer, nullptr, &disabled) == 2);
  CHECK(disabled.scale() == 1.0);
  nn::save_checkpoint(path, model, optimizer, nullptr, 3);
  nn::GradScaler fresh;
  CHECK(nn::load_checkpoint(path, model, optimizer, nullptr, &fresh) == 3);
  CHECK(fresh.scale() == 65536.0);
  std::filesystem::remove(path);
}

TEST_CASE("GradScaler: disabled, it passes the loss through and always steps") {
  const Tensor p = parameter({1.0f});
  nn::SGD optimizer({p}, {.lr = 1.0});
  nn::GradScaler scaler({.enabled = false});
  CHECK_FALSE(scaler.is_enabled());
  CHECK(scaler.scale() == 1.0);
  const Tensor loss = sum(mul(p, 2.0));
  CHECK(scaler.scale(loss).impl() == loss.impl());
  loss.backward();
  scaler.unscale_(optimizer);
  scaler.unscale_(optimizer);  // nothing to do, so nothing to refuse
  CHECK(scaler.step(optimizer));
  scaler.update();
  check_close(p, tensor({-1.0f}), 0, 0);
  CHECK(scaler.state_dict().empty());
  scaler.load_state_dict({});
}

TEST_CASE("GradScaler: misuse is refused with the reason") {
  const Tensor p = parameter({1.0f});
  nn::SGD optimizer({p}, {.lr = 1.0});
  nn::GradScaler scaler;
  CHECK_THROWS_WITH_ALL(scaler.update(), "GradScaler.update: no step() since the last update()");
  scaler.scale(sum(p)).backward();
  scaler.unscale_(optimizer);
  CHECK_THROWS_WITH_ALL(scaler.unscale_(optimizer),
                        "GradScaler.unscale_: unscale_() was already called on this optimizer since the last update()");
  CHECK(scaler.step(optimizer));
  CHECK_THROWS_WITH_ALL(scaler.step(optimizer),
                        "GradScaler.step: step() was already called on this optimizer since the last update()");
  CHECK_THROWS_WITH_ALL(scaler.unscale_(optimizer), "GradScaler.unscale_: step() was already called");
  scaler.update();
  // After update() a new iteration may unscale again.
  optimizer.zero_grad();
  scaler.scale(sum(p)).backward();
  scaler.unscale_(optimizer);
  CHECK(scaler.step(optimizer));
  scaler.update();

  CHECK_THROWS_WITH_ALL(scaler.scale(Tensor()), "GradScaler.scale: loss is undefined");
  CHECK_THROWS_WITH_ALL(scaler.scale(scalar_tensor(1.0, kInt64)),
                        "GradScaler.scale: loss must be floating point, got int64");

  Tensor half = parameter({1.0f}).to(kFloat16).detach();
  half.requires_grad_(true);
  half.mutable_grad() = ones({1}).to(kFloat16);
  nn::SGD half_optimizer({half}, {.lr = 1.0});
  CHECK_THROWS_WITH_ALL(scaler.unscale_(half_optimizer), "GradScaler.unscale_: parameter 0 has a float16 gradient");

  CHECK_THROWS_WITH_ALL(nn::GradScaler({.init_scale = 0.0}),
                        "GradScaler: init_scale must be positive and at most float32's largest value", "got 0");
  CHECK_THROWS_WITH_ALL(nn::GradScaler({.init_scale = 1e39}), "GradScaler: init_scale", "got 1e+39");
  CHECK_THROWS_WITH_ALL(nn::GradScaler({.growth_factor = 1.0}), "GradScaler: growth_factor must be > 1, got 1");
  CHECK_THROWS_WITH_ALL(nn::GradScaler({.backoff_factor = 1.0}),
                        "GradScaler: backoff_factor must be in (0, 1), got 1");
  CHECK_THROWS_WITH_ALL(nn::GradScaler({.growth_interval = 0}), "GradScaler: growth_interval must be >= 1, got 0");
}

TEST_CASE("GradScaler: a float16 autocast run skips its first step, which overflows float16, then trains") {
  // Needs the float16 CPU kernels. The loss is the float32 sum of a float16 product's outputs, so
  // the gradient reaching each output is the scale itself: 2^16 does not fit float16 (largest
  // 65504) and becomes inf, so the first step must be skipped and the scale halved; 2^15 fits,
  // and so do the weights' gradients (2^15 times inputs below 1 in magnitude).
  manual_seed(7);
  nn::Linear linear(4, 3);
  const Tensor before = linear.weight.detach().clone();
  nn::SGD optimizer(linear.parameters(), {.lr = 0.1});
  nn::GradScaler scaler;
  const Tensor x = clamp(mul(randn({1, 4}), 0.3), -0.9, 0.9);
  auto step = [&] {
    optimizer.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(DeviceType::CPU, kFloat16);
      loss = sum(linear.forward(x));
    }
    CHECK(loss.dtype() == kFloat32);
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(optimizer);
    scaler.update();
    return stepped;
  };
  CHECK_FALSE(step());
  CHECK(scaler.scale() == 32768.0);
  check_close(linear.weight, before, 0, 0);
  CHECK(step());
  CHECK(scaler.scale() == 32768.0);
  REQUIRE(linear.weight.grad().defined());
  CHECK(linear.weight.grad().dtype() == kFloat32);
  // The unscaled gradient of sum(x W^T + b) with respect to W is x in every row.
  check_close(linear.weight.grad(), expand(x, {3, 4}).to(kFloat16).to(kFloat32), 0, 0);
  CHECK(max_abs(sub(linear.weight, before)) > 0);
}

TEST_CASE("unscale_grads: one pass multiplies every gradient by 1 / scale and flags inf or NaN") {
  // float32, float64 and bfloat16 gradients, one of them a strided view, one empty.
  Tensor f32 = tensor<float>({2.0f, -4.0f, 6.0f}), f64 = tensor<double>({0.5, 8.0});
  Tensor bf16 = tensor<float>({3.0f, 1e-3f}).to(kBFloat16);
  Tensor base = tensor<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  Tensor strided = base.t();
  Tensor empty = zeros({0});
  const Tensor found = zeros({});
  const std::vector<Tensor> grads = {f32, f64, bf16, strided, empty};
  kernels::unscale_grads[Device()](grads, 0.25, found);
  CHECK(f32.to_vector<float>() == std::vector<float>{0.5f, -1.0f, 1.5f});
  CHECK(f64.to_vector<double>() == std::vector<double>{0.125, 2.0});
  // Rounded once to bfloat16, as half.h rounds the float32 product.
  CHECK(bf16.to_vector<float>() == std::vector<float>{0.75f, static_cast<float>(BFloat16(
                                                                 static_cast<float>(BFloat16(1e-3f)) * 0.25f))});
  // The view's elements, and through it its base's.
  CHECK(base.to_vector<float>() == std::vector<float>{0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f});
  CHECK(found.item<float>() == 0.0f);

  // One non-finite value anywhere sets the flag; a set flag stays set.
  for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    Tensor clean = tensor<float>({1.0f, 2.0f}), dirty = tensor<float>({1.0f, bad, 3.0f});
    const Tensor flag = zeros({});
    kernels::unscale_grads[Device()](std::vector<Tensor>{clean, dirty}, 0.5, flag);
    CHECK(flag.item<float>() == 1.0f);
    CHECK(clean.to_vector<float>() == std::vector<float>{0.5f, 1.0f});
    kernels::unscale_grads[Device()](std::vector<Tensor>{clean}, 0.5, flag);
    CHECK(flag.item<float>() == 1.0f);
  }
  // A finite value that unscaling pushes past the format's range counts as non-finite: the check
  // is of what is stored.
  Tensor large = tensor<float>({3e38f});
  const Tensor flag = zeros({});
  kernels::unscale_grads[Device()](std::vector<Tensor>{large}, 4.0, flag);
  CHECK(flag.item<float>() == 1.0f);
}
