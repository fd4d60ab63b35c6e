// Learning-rate schedules as functions of the step, and the Scheduler that applies one to an
// optimizer's groups:
//
//   nn::Scheduler scheduler(optimizer, std::make_shared<nn::WarmupCosine>(3e-4, 100, 10000));
//   for (...) { loss.backward(); optimizer.step(); scheduler.step(); optimizer.zero_grad(); }
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/modules/module.h"
#include "nn/optim/optimizer.h"

namespace ember::nn {

// A learning rate for every step >= 0. Step 0 is the rate of the first optimizer step.
class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;
};

// peak_lr * step / warmup_steps while step < warmup_steps, then linear decay to 0 at
// total_steps, and 0 after.
class WarmupLinear : public LRSchedule {
 public:
  WarmupLinear(double peak_lr, int64_t warmup_steps, int64_t total_steps);
  double lr_at(int64_t step) const override;

 private:
  double peak_lr_;
  int64_t warmup_steps_, total_steps_;
};

// Linear warmup as WarmupLinear, then
//   min_lr + (peak_lr - min_lr) * (1 + cos(pi * (step - warmup_steps) / (total_steps - warmup_steps))) / 2
// down to min_lr at total_steps, and min_lr after.
class WarmupCosine : public LRSchedule {
 public:
  WarmupCosine(double peak_lr, int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0);
  double lr_at(int64_t step) const override;

 private:
  double peak_lr_, min_lr_;
  int64_t warmup_steps_, total_steps_;
};

// The schedule of "Attention Is All You Need" (Noam):
//   factor * d_model^-0.5 * min(s^-0.5, s * warmup_steps^-1.5),  s = max(step, 1)
// rising linearly for warmup_steps, then decaying as the inverse square root of the step.
// Step 0 counts as step 1, so the first update does not have rate 0.
class InverseSqrt : public LRSchedule {
 public:
  InverseSqrt(int64_t d_model, int64_t warmup_steps, double factor = 1.0);
  double lr_at(int64_t step) const override;

 private:
  int64_t d_model_, warmup_steps_;
  double factor_;
};

// Sets an optimizer's learning rates from schedules: at construction the rate of step 0,
// then after each step() the rate of the next step. One schedule for every group, or one
// per group (groups with different rates). The optimizer must outlive the scheduler.
class Scheduler {
 public:
  Scheduler(Optimizer& optimizer, std::shared_ptr<const LRSchedule> schedule);
  Scheduler(Optimizer& optimizer, std::vector<std::shared_ptr<const LRSchedule>> schedules);

  // Advances to the next step and sets every group's rate for it.
  void step();
  // The number of step() calls so far: the step whose rate the optimizer now holds.
  int64_t current_step() const { return step_; }
  // "step": a 0-d int64 tensor. Loading it sets the step and the groups' rates for it.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);

 private:
  void apply();

  Optimizer& optimizer_;
  std::vector<std::shared_ptr<const LRSchedule>> schedules_;  // one per group
  int64_t step_ = 0;
};

}  // namespace ember::nn
