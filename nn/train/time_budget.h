// A training run's time budget, and its learning-rate schedule paced to end when the time does.
// Every rank of a data-parallel job reads the same clock (rank 0's), so all of them stop at the
// same step with the same learning rate.
//
//   train::TimeBudget budget({.seconds = 60 * minutes});          // the clock starts here
//   nn::Scheduler scheduler(optimizer, std::make_shared<nn::WarmupCosine>(lr, warmup, total_steps));
//   budget.pace(scheduler, total_steps);
//   while (!budget.finished()) {
//     ...one training step...
//     budget.step_done();            // moves the scheduler on, in place of scheduler.step()
//   }
//   if (budget.out_of_time()) fmt::print("the budget ran out\n");
//
// The schedule's position is the further of two: the steps taken, one schedule step each, and
// the share of the time spent, of the time there was when the paced steps began, times the
// schedule steps left then. With time to spare the steps lead and the schedule runs as planned,
// step by step; on a slower machine than the plan assumed (or one that slows down) the time leads,
// and the schedule reaches its last step exactly when the budget ends, instead of stopping with
// the learning rate still high.
//
// A run whose step count is planned from the pace of its first steps paces a provisional
// schedule with no total, reads the pace, and paces the planned schedule:
//
//   budget.pace(scheduler);                                       // no total: the time ends it
//   for (int64_t s = 0; s < 30; ++s) { ...one training step...; budget.step_done(); }
//   const int64_t total = budget.steps_done() + budget.steps_that_fit(budget.median_step_seconds(3));
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "nn/optim/lr_schedule.h"

namespace ember::train {

struct TimeBudgetOptions {
  double seconds = 0;  // the budget, from the TimeBudget's construction
  // Seconds since any fixed origin, on a monotonic clock (std::chrono::steady_clock when empty).
  // Tests pass a clock they move by hand.
  std::function<double()> clock = {};
  // What every rank makes of a value this rank measured (a clock reading, a planned step count):
  // rank 0's, broadcast through the process group in a data-parallel job, the value itself in a
  // process of its own (the default when empty). Every rank must call the members that agree
  // (step_done, steps_that_fit) in the same order, as with any collective.
  std::function<double(double)> agree = {};
};

class TimeBudget {
 public:
  explicit TimeBudget(TimeBudgetOptions options);

  // From now on each step_done() moves `scheduler`, from its current step, towards
  // `total_steps`, the step at which its schedule ends (the scheduler's own schedule must be laid
  // out over the same total). total_steps 0: the total is not planned yet; the scheduler moves a
  // step per step, and only the time ends the run. Call again when the scheduler is replaced or
  // the total planned; the scheduler must outlive its pacing.
  void pace(nn::Scheduler& scheduler, int64_t total_steps = 0);

  // After each training step: reads the clock (every rank agrees on the reading) and moves the
  // paced scheduler to the schedule step of the next training step.
  void step_done();

  // Take no more steps: the paced schedule has reached its end, or the time is up.
  bool finished() const;
  // The time was up at the last reading.
  bool out_of_time() const { return elapsed_ >= options_.seconds; }
  // At the last reading (construction, step_done or steps_that_fit), as every rank agrees.
  double elapsed_seconds() const { return elapsed_; }
  double seconds_left() const { return options_.seconds - elapsed_; }
  double budget_seconds() const { return options_.seconds; }
  int64_t steps_done() const { return steps_done_; }
  // Where the paced schedule stands (fractional while the time leads), and its end.
  double schedule_position() const { return position_; }
  int64_t total_steps() const { return total_steps_; }

  // The median time of the steps since the last pace(), leaving out its first `untimed` ones
  // (they fill caches and allocators, and capture CUDA graphs). Throws when no step is left to time.
  double median_step_seconds(int64_t untimed) const;
  // How many steps of `seconds_per_step` fit in the time left now, less `reserve_seconds` (for
  // a final evaluation, say); at least 0. Reads the clock; every rank gets rank 0's answer.
  int64_t steps_that_fit(double seconds_per_step, double reserve_seconds = 0);

 private:
  // Where the time spent says the schedule should be; the anchor is the first step after pace().
  struct TimeAnchor {
    double position = 0;
    double elapsed = 0;
  };
  double read_clock();

  TimeBudgetOptions options_;
  double origin_ = 0;   // this rank's clock at construction
  double elapsed_ = 0;  // the last agreed reading, in seconds since construction
  int64_t steps_done_ = 0;
  nn::Scheduler* scheduler_ = nullptr;
  int64_t total_steps_ = 0;
  int64_t paced_from_step_ = 0;     // the scheduler's step at pace()
  int64_t steps_done_at_pace_ = 0;  // steps_done() at pace()
  double position_ = 0;
  std::optional<TimeAnchor> anchor_;
  double elapsed_at_last_step_ = 0;
  std::vector<double> step_seconds_;  // the steps since pace(), while the total is unplanned
};

}  // namespace ember::train
