// Learning-rate schedules and the Scheduler.
#include "nn/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "core/ops/factory.h"

namespace ember::nn {
namespace {

void check_step(const char* schedule, int64_t step) {
  EMBER_CHECK(step >= 0, "{}: step must be >= 0, got {}", schedule, step);
}

void check_warmup_and_total(const char* schedule, double peak_lr, int64_t warmup_steps, int64_t total_steps) {
  EMBER_CHECK(peak_lr >= 0.0 && std::isfinite(peak_lr), "{}: peak_lr must be >= 0, got {}", schedule, peak_lr);
  EMBER_CHECK(warmup_steps >= 0 && total_steps > 0 && warmup_steps <= total_steps,
              "{}: needs 0 <= warmup_steps <= total_steps and total_steps > 0, got warmup_steps {} and total_steps {}",
              schedule, warmup_steps, total_steps);
}

}  // namespace

WarmupLinear::WarmupLinear(double peak_lr, int64_t warmup_steps, int64_t total_steps)
    : peak_lr_(peak_lr), warmup_steps_(warmup_steps), total_steps_(total_steps) {
  check_warmup_and_total("WarmupLinear", peak_lr, warmup_steps, total_steps);
}

double WarmupLinear::lr_at(int64_t step) const {
  check_step("WarmupLinear", step);
  if (step < warmup_steps_) return peak_lr_ * static_cast<double>(step) / static_cast<double>(warmup_steps_);
  if (step >= total_steps_) return 0.0;
  return peak_lr_ * static_cast<double>(total_steps_ - step) / static_cast<double>(total_steps_ - warmup_steps_);
}

WarmupCosine::WarmupCosine(double peak_lr, int64_t warmup_steps, int64_t total_steps, double min_lr)
    : peak_lr_(peak_lr), min_lr_(min_lr), warmup_steps_(warmup_steps), total_steps_(total_steps) {
  check_warmup_and_total("WarmupCosine", peak_lr, warmup_steps, total_steps);
  EMBER_CHECK(min_lr >= 0.0 && min_lr <= peak_lr, "WarmupCosine: min_lr must be in [0, peak_lr = {}], got {}",
              peak_lr, min_lr);
}

double WarmupCosine::lr_at(int64_t step) const {
  check_step("WarmupCosine", step);
  if (step < warmup_steps_) return peak_lr_ * static_cast<double>(step) / static_cast<double>(warmup_steps_);
  if (step >= total_steps_) return min_lr_;
  const double progress =
      static_cast<double>(step - warmup_steps_) / static_cast<double>(total_steps_ - warmup_steps_);
  return min_lr_ + (peak_lr_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

InverseSqrt::InverseSqrt(int64_t d_model, int64_t warmup_steps, double factor)
    : d_model_(d_model), warmup_steps_(warmup_steps), factor_(factor) {
  EMBER_CHECK(d_model > 0, "InverseSqrt: d_model must be > 0, got {}", d_model);
  EMBER_CHECK(warmup_steps > 0, "InverseSqrt: warmup_steps must be > 0, got {}", warmup_steps);
  EMBER_CHECK(factor >= 0.0 && std::isfinite(factor), "InverseSqrt: factor must be >= 0, got {}", factor);
}

double InverseSqrt::lr_at(int64_t step) const {
  check_step("InverseSqrt", step);
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double warmup = static_cast<double>(warmup_steps_);
  return factor_ / std::sqrt(static_cast<double>(d_model_)) *
         std::min(1.0 / std::sqrt(s), s / (warmup * std::sqrt(warmup)));
}

Scheduler::Scheduler(Optimizer& optimizer, std::shared_ptr<const LRSchedule> schedule)
    : Scheduler(optimizer, std::vector<std::shared_ptr<const LRSchedule>>(optimizer.num_groups(), schedule)) {}

Scheduler::Scheduler(Optimizer& optimizer, std::vector<std::shared_ptr<const LRSchedule>> schedules)
    : optimizer_(optimizer), schedules_(std::move(schedules)) {
  EMBER_CHECK(schedules_.size() == optimizer_.num_groups(),
              "Scheduler: got {} schedules for the {} parameter groups of {}", schedules_.size(),
              optimizer_.num_groups(), optimizer_.type_name());
  for (size_t g = 0; g < schedules_.size(); ++g) {
    EMBER_CHECK(schedules_[g] != nullptr, "Scheduler: the schedule for parameter group {} is null", g);
  }
  apply();
}

void Scheduler::apply() {
  for (size_t g = 0; g < schedules_.size(); ++g) optimizer_.set_lr(g, schedules_[g]->lr_at(step_));
}

void Scheduler::step() {
  EMBER_CHECK(step_ < std::numeric_limits<int64_t>::max(), "Scheduler.step: the step count {} is int64's largest",
              step_);
  ++step_;
  apply();
}

StateDict Scheduler::state_dict() const { return {{"step", full_int64({}, step_)}}; }

void Scheduler::load_state_dict(const StateDict& state) {
  auto it = state.find("step");
  EMBER_CHECK(it != state.end(), "Scheduler.load_state_dict: the state dict has no 'step'");
  EMBER_CHECK(it->second.defined() && it->second.numel() == 1 && it->second.dtype() == kInt64,
              "Scheduler.load_state_dict: 'step' must be one int64 value");
  const int64_t step = it->second.item<int64_t>();
  // Below INT64_MAX as well: the next step() counts one more.
  EMBER_CHECK(step >= 0 && step < std::numeric_limits<int64_t>::max(),
              "Scheduler.load_state_dict: 'step' must be >= 0 and below {}, got {}", std::numeric_limits<int64_t>::max(),
              step);
  step_ = step;
  apply();
}

}  // namespace ember::nn
