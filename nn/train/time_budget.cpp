// The time budget and its paced schedule (nn/train/time_budget.h).
#include "nn/train/time_budget.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/distributed/process_group.h"
#include "core/error.h"
#include "core/float_to_int.h"
#include "core/ops/factory.h"

namespace ember::train {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double rank_zero_value(double value) {
  if (!distributed::is_initialized() || distributed::world_size() == 1) return value;
  Tensor shared = tensor(std::vector<double>{value}, {1}, kFloat64);
  distributed::broadcast(shared, 0);
  return shared.item<double>();
}

}  // namespace

TimeBudget::TimeBudget(TimeBudgetOptions options) : options_(std::move(options)) {
  EMBER_CHECK(std::isfinite(options_.seconds) && options_.seconds > 0,
              "TimeBudget: the budget must be a positive number of seconds, got {}", options_.seconds);
  if (!options_.clock) options_.clock = steady_seconds;
  if (!options_.agree) options_.agree = rank_zero_value;
  origin_ = options_.clock();
}

double TimeBudget::read_clock() {
  elapsed_ = options_.agree(options_.clock() - origin_);
  return elapsed_;
}

void TimeBudget::pace(nn::Scheduler& scheduler, int64_t total_steps) {
  EMBER_CHECK(total_steps >= 0, "TimeBudget.pace: total_steps must be >= 0 (0: not planned yet), got {}",
              total_steps);
  scheduler_ = &scheduler;
  total_steps_ = total_steps;
  paced_from_step_ = scheduler.current_step();
  steps_done_at_pace_ = steps_done_;
  position_ = static_cast<double>(paced_from_step_);
  anchor_.reset();
  step_seconds_.clear();
}

void TimeBudget::step_done() {
  const double now = read_clock();
  ++steps_done_;
  if (total_steps_ == 0) step_seconds_.push_back(now - elapsed_at_last_step_);
  elapsed_at_last_step_ = now;
  if (scheduler_ == nullptr) return;

  position_ = static_cast<double>(paced_from_step_ + (steps_done_ - steps_done_at_pace_));
  if (total_steps_ > 0) {
    const double total = static_cast<double>(total_steps_);
    if (!anchor_) {
      // The first step after pace() often fills caches and allocators: the time's share is
      // counted from its end, so that one slow step does not hurry the whole schedule.
      anchor_ = TimeAnchor{position_, now};
    } else if (options_.seconds > anchor_->elapsed) {
      const double spent = (now - anchor_->elapsed) / (options_.seconds - anchor_->elapsed);
      position_ = std::max(position_, anchor_->position + (total - anchor_->position) * spent);
    }
    if (out_of_time()) position_ = total;
    position_ = std::min(position_, std::max(total, static_cast<double>(paced_from_step_)));
    // The scheduler takes the whole steps the position has passed, and never passes the end.
    const int64_t target = std::min(float_to_int<int64_t>(std::floor(position_)), total_steps_);
    while (scheduler_->current_step() < target) scheduler_->step();
  } else {
    scheduler_->step();
  }
}

bool TimeBudget::finished() const {
  if (out_of_time()) return true;
  return scheduler_ != nullptr && total_steps_ > 0 && position_ >= static_cast<double>(total_steps_);
}

double TimeBudget::median_step_seconds(int64_t untimed) const {
  EMBER_CHECK(untimed >= 0, "TimeBudget.median_step_seconds: untimed must be >= 0, got {}", untimed);
  const int64_t timed = static_cast<int64_t>(step_seconds_.size()) - untimed;
  EMBER_CHECK(timed > 0,
              "TimeBudget.median_step_seconds: {} step(s) since pace() without a planned total, none left to time "
              "after the first {}",
              step_seconds_.size(), untimed);
  std::vector<double> seconds(step_seconds_.begin() + untimed, step_seconds_.end());
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

int64_t TimeBudget::steps_that_fit(double seconds_per_step, double reserve_seconds) {
  EMBER_CHECK(std::isfinite(seconds_per_step) && seconds_per_step > 0,
              "TimeBudget.steps_that_fit: seconds_per_step must be > 0, got {}", seconds_per_step);
  EMBER_CHECK(std::isfinite(reserve_seconds) && reserve_seconds >= 0,
              "TimeBudget.steps_that_fit: reserve_seconds must be >= 0, got {}", reserve_seconds);
  const double left = options_.seconds - read_clock() - reserve_seconds;
  // Bounded so the count converts to int64_t whatever the pace.
  const double steps = std::clamp(std::floor(left / seconds_per_step), 0.0, 1e15);
  return static_cast<int64_t>(options_.agree(steps));
}

}  // namespace ember::train
