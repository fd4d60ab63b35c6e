// GradScaler: the scale, its growth and backoff, and the unscale / inf check / skip of a step.
#include "nn/optim/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/memory_overlap.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/grad_unscale.h"

namespace ember::nn {
namespace {

// The scale multiplies float32 losses (a 16-bit loss is scaled in float32), so it must stay a
// finite float32: past 3.4e38 every scaled loss would be inf and every step skipped.
constexpr double kLargestScale = std::numeric_limits<float>::max();

void check_options(const GradScalerOptions& options) {
  EMBER_CHECK(options.init_scale > 0 && options.init_scale <= kLargestScale,
              "GradScaler: init_scale must be positive and at most float32's largest value {}, got {}", kLargestScale,
              options.init_scale);
  EMBER_CHECK(options.growth_factor > 1 && std::isfinite(options.growth_factor),
              "GradScaler: growth_factor must be > 1, got {}", options.growth_factor);
  EMBER_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1,
              "GradScaler: backoff_factor must be in (0, 1), got {}", options.backoff_factor);
  EMBER_CHECK(options.growth_interval >= 1, "GradScaler: growth_interval must be >= 1, got {}",
              options.growth_interval);
}

const Tensor& entry(const StateDict& state, const std::string& name, DType dtype) {
  const auto found = state.find(name);
  EMBER_CHECK(found != state.end(), "GradScaler.load_state_dict: the state dict has no '{}'", name);
  EMBER_CHECK(found->second.defined() && found->second.numel() == 1 && found->second.dtype() == dtype,
              "GradScaler.load_state_dict: '{}' must be one {} value", name, dtype_name(dtype));
  return found->second;
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  check_options(options_);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  EMBER_CHECK(loss.defined(), "GradScaler.scale: loss is undefined");
  EMBER_CHECK(is_floating_point(loss.dtype()), "GradScaler.scale: loss must be floating point, got {}",
              loss.dtype());
  if (!options_.enabled) return loss;
  return mul(is_16_bit_floating_point(loss.dtype()) ? loss.to(kFloat32) : loss, scale_);
}

double GradScaler::scale() const { return options_.enabled ? scale_ : 1.0; }

GradScaler::OptimizerRecord& GradScaler::record_of(const Optimizer& optimizer) { return records_[&optimizer]; }

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!options_.enabled) return;
  OptimizerRecord& record = record_of(optimizer);
  EMBER_CHECK(record.stage != Stage::Unscaled,
              "GradScaler.unscale_: unscale_() was already called on this optimizer since the last update()");
  EMBER_CHECK(record.stage != Stage::Stepped,
              "GradScaler.unscale_: step() was already called on this optimizer since the last update()");
  NoGradGuard no_grad;
  // The scale is a power of two unless set otherwise, so its inverse, and the division, are exact.
  const double inverse = 1.0 / scale_;
  // The gradients by device, each device's unscaled and checked in one call that notes inf or
  // NaN in a flag there: the host reads one value per device, not one per parameter.
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  int64_t index = 0;
  for (size_t g = 0; g < optimizer.num_groups(); ++g) {
    for (const Tensor& param : optimizer.group(g).params) {
      const Tensor grad = param.grad();
      if (grad.defined()) {
        // A float16 gradient would lose the small values loss scaling exists to keep: the
        // parameters (master weights) stay float32 and autocast casts them for the products.
        EMBER_CHECK(grad.dtype() != kFloat16,
                    "GradScaler.unscale_: parameter {} has a float16 gradient; keep parameters in float32 and "
                    "let AutocastGuard cast them",
                    index);
        auto same_device = [&](const auto& entry) { return entry.first == grad.device(); };
        auto entry = std::find_if(by_device.begin(), by_device.end(), same_device);
        if (entry == by_device.end()) entry = by_device.insert(by_device.end(), {grad.device(), {}});
        check_no_internal_overlap(grad, "GradScaler.unscale_");
        entry->second.push_back(grad);
      }
      ++index;
    }
  }
  std::vector<Tensor> found_inf;
  for (const auto& [device, grads] : by_device) {
    found_inf.push_back(zeros({}, TensorOptions(kFloat32).device(device)));
    unscale_grads(grads, inverse, found_inf.back());
  }
  record.stage = Stage::Unscaled;
  record.found_inf = std::any_of(found_inf.begin(), found_inf.end(),
                                 [](const Tensor& found) { return found.item<float>() != 0.0f; });
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  EMBER_CHECK(record_of(optimizer).stage != Stage::Stepped,
              "GradScaler.step: step() was already called on this optimizer since the last update()");
  if (record_of(optimizer).stage == Stage::Ready) unscale_(optimizer);
  OptimizerRecord& record = record_of(optimizer);
  record.stage = Stage::Stepped;
  if (record.found_inf) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  bool stepped = false, found_inf = false;
  for (const auto& [optimizer, record] : records_) {
    stepped = stepped || record.stage == Stage::Stepped;
    found_inf = found_inf || (record.stage == Stage::Stepped && record.found_inf);
  }
  EMBER_CHECK(stepped, "GradScaler.update: no step() since the last update() (scale the loss, backward, "
                       "step(optimizer), then update())");
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    // As PyTorch: the scale grows only while the grown value is finite in float32.
    if (scale_ * options_.growth_factor <= kLargestScale) scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
  records_.clear();
}

StateDict GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  return {
      {"scale", scalar_tensor(scale_, kFloat64)},
      {"growth_factor", scalar_tensor(options_.growth_factor, kFloat64)},
      {"backoff_factor", scalar_tensor(options_.backoff_factor, kFloat64)},
      {"growth_interval", full_int64({}, options_.growth_interval)},
      {"growth_tracker", full_int64({}, growth_tracker_)},
  };
}

void GradScaler::load_state_dict(const StateDict& state) {
  if (!options_.enabled) return;
  EMBER_CHECK(!state.empty(),
              "GradScaler.load_state_dict: the state dict is empty (was it saved by a disabled GradScaler?)");
  GradScalerOptions options = options_;
  options.init_scale = entry(state, "scale", kFloat64).item<double>();
  options.growth_factor = entry(state, "growth_factor", kFloat64).item<double>();
  options.backoff_factor = entry(state, "backoff_factor", kFloat64).item<double>();
  options.growth_interval = entry(state, "growth_interval", kInt64).item<int64_t>();
  const int64_t growth_tracker = entry(state, "growth_tracker", kInt64).item<int64_t>();
  // check_options's checks, worded with the state dict's keys.
  EMBER_CHECK(options.init_scale > 0 && options.init_scale <= kLargestScale,
              "GradScaler.load_state_dict: 'scale' must be positive and at most float32's largest value {}, got {}",
              kLargestScale, options.init_scale);
  EMBER_CHECK(options.growth_factor > 1 && std::isfinite(options.growth_factor),
              "GradScaler.load_state_dict: 'growth_factor' must be > 1 and finite, got {}", options.growth_factor);
  EMBER_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1,
              "GradScaler.load_state_dict: 'backoff_factor' must be in (0, 1), got {}", options.backoff_factor);
  EMBER_CHECK(options.growth_interval >= 1, "GradScaler.load_state_dict: 'growth_interval' must be >= 1, got {}",
              options.growth_interval);
  EMBER_CHECK(growth_tracker >= 0 && growth_tracker < options.growth_interval,
              "GradScaler.load_state_dict: growth_tracker {} is not in [0, growth_interval {})", growth_tracker,
              options.growth_interval);
  options_ = options;
  scale_ = options.init_scale;
  growth_tracker_ = growth_tracker;
  records_.clear();
}

}  // namespace ember::nn
