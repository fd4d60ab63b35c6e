// TimeBudget: a schedule paced by steps while the time suffices and by the time when it does not,
// ending exactly when the budget does; planning from the pace of the first steps; ranks that
// agree. A fake clock moves by hand, so nothing sleeps.
#include <deque>
#include <memory>

#include "helpers.h"
#include "nn/optim/sgd.h"
#include "nn/train/time_budget.h"

using namespace ember;
using namespace ember::testing;

namespace {

// An optimizer whose learning rate a scheduler sets, and a clock the test moves.
struct PacedRun {
  Tensor weight = tensor({1.0}).requires_grad_(true);
  nn::SGD optimizer{{weight}, {.lr = 1.0}};
  double time = 0;

  train::TimeBudget budget(double seconds) {
    return train::TimeBudget(
        {.seconds = seconds, .clock = [this] { return time; }, .agree = [](double value) { return value; }});
  }
};

std::shared_ptr<nn::WarmupCosine> cosine(int64_t total_steps) {
  return std::make_shared<nn::WarmupCosine>(1.0, total_steps / 10, total_steps, 0.01);
}

}  // namespace

TEST_CASE("TimeBudget: with time to spare the schedule runs a step per step and ends at the planned total") {
  PacedRun run;
  train::TimeBudget budget = run.budget(100);
  const auto schedule = cosine(20);
  nn::Scheduler scheduler(run.optimizer, schedule);
  budget.pace(scheduler, 20);
  int64_t steps = 0;
  while (!budget.finished()) {
    run.time += 1.0;
    budget.step_done();
    ++steps;
    CHECK(scheduler.current_step() == steps);
    CHECK(run.optimizer.lr(0) == schedule->lr_at(steps));
  }
  CHECK(steps == 20);
  CHECK(!budget.out_of_time());
  CHECK(budget.elapsed_seconds() == 20.0);
  CHECK(budget.steps_done() == 20);
}

TEST_CASE("TimeBudget: a slow first step is not held against the schedule") {
  PacedRun run;
  train::TimeBudget budget = run.budget(100);
  const auto schedule = cosine(100);
  nn::Scheduler scheduler(run.optimizer, schedule);
  budget.pace(scheduler, 100);
  run.time = 30;  // allocating, say: a third of the budget
  budget.step_done();
  for (int64_t step = 2; step <= 100; ++step) {
    run.time += 0.5;  // the rest fits in the 70 s left
    budget.step_done();
    CHECK(scheduler.current_step() == step);
  }
  CHECK(budget.finished());
  CHECK(!budget.out_of_time());
}

TEST_CASE("TimeBudget: on a slower machine than planned the schedule ends exactly when the time does") {
  // The plan of 6,858 steps in 10 minutes, on a machine where 5,421 fit.
  PacedRun run;
  train::TimeBudget budget = run.budget(600);
  const auto schedule = cosine(6858);
  nn::Scheduler scheduler(run.optimizer, schedule);
  budget.pace(scheduler, 6858);
  int64_t steps = 0;
  double previous_lr = 2.0;
  bool decays_monotonically = true;
  while (!budget.finished()) {
    ++steps;
    run.time = static_cast<double>(steps) * 600.0 / 5421.0;
    budget.step_done();
    if (scheduler.current_step() > 686 && run.optimizer.lr(0) > previous_lr) decays_monotonically = false;
    previous_lr = run.optimizer.lr(0);
    if (steps == 2710) {  // half the time: half the schedule
      CHECK(budget.schedule_position() == doctest::Approx(3429).epsilon(0.002));
      CHECK(!budget.finished());
    }
  }
  CHECK(decays_monotonically);
  CHECK(steps == 5421);
  CHECK(budget.out_of_time());
  CHECK(scheduler.current_step() == 6858);
  CHECK(run.optimizer.lr(0) == schedule->lr_at(6858));  // the floor, 1% of the peak

  SUBCASE("and not before: a step short of the budget, the rate is not yet the last") {
    PacedRun again;
    train::TimeBudget budget2 = again.budget(10);
    nn::Scheduler scheduler2(again.optimizer, cosine(100));
    budget2.pace(scheduler2, 100);
    for (int64_t step = 1; step <= 9; ++step) {
      again.time = step;
      budget2.step_done();
    }
    CHECK(!budget2.finished());
    CHECK(scheduler2.current_step() < 100);
    again.time = 10;
    budget2.step_done();
    CHECK(budget2.finished());
    CHECK(scheduler2.current_step() == 100);
  }
}

TEST_CASE("TimeBudget: when the pace slows midway, the rest of the schedule fits the time left") {
  PacedRun run;
  train::TimeBudget budget = run.budget(100);
  const auto schedule = cosine(100);
  nn::Scheduler scheduler(run.optimizer, schedule);
  budget.pace(scheduler, 100);
  for (int64_t step = 1; step <= 50; ++step) {  // on plan: one second a step
    run.time = static_cast<double>(step);
    budget.step_done();
    CHECK(scheduler.current_step() == step);
  }
  int64_t steps = 50;
  while (!budget.finished()) {  // then two seconds a step: 25 steps fit in the 50 s left
    run.time += 2.0;
    budget.step_done();
    ++steps;
    CHECK(scheduler.current_step() == doctest::Approx(50 + 2 * (steps - 50)).epsilon(0.02));
  }
  CHECK(steps == 75);
  CHECK(run.time == 100.0);
  CHECK(scheduler.current_step() == 100);
}

TEST_CASE("TimeBudget: planning from the median pace of the first steps, then pacing the planned schedule") {
  PacedRun run;
  train::TimeBudget budget = run.budget(100);
  nn::Scheduler provisional(run.optimizer, std::make_shared<nn::WarmupCosine>(1.0, 50, 1000000));
  budget.pace(provisional);  // no total yet: a step per step, only the time ends the run
  for (const double seconds : {5.0, 5.0, 5.0, 1.0, 1.25, 0.75, 1.0, 1.5, 1.0, 0.5}) {
    run.time += seconds;
    budget.step_done();
    CHECK(!budget.finished());
  }
  CHECK(provisional.current_step() == 10);
  CHECK(budget.median_step_seconds(3) == 1.0);
  CHECK(budget.median_step_seconds(0) == 1.25);
  CHECK(budget.steps_that_fit(1.0) == 78);        // 22 s spent
  CHECK(budget.steps_that_fit(1.0, 10.0) == 68);  // with 10 s held back
  CHECK(budget.steps_that_fit(1000.0) == 0);
  const int64_t total = budget.steps_done() + budget.steps_that_fit(budget.median_step_seconds(3));
  CHECK(total == 88);

  const auto schedule = std::make_shared<nn::WarmupCosine>(1.0, 50, total);
  nn::Scheduler planned(run.optimizer, schedule);
  for (int64_t s = 0; s < budget.steps_done(); ++s) planned.step();  // caught up with the steps taken
  budget.pace(planned, total);
  SUBCASE("at the planned pace the planned steps end with the time") {
    while (!budget.finished()) {
      run.time += 1.0;
      budget.step_done();
      CHECK(planned.current_step() == budget.steps_done());
    }
    CHECK(budget.steps_done() == 88);
    CHECK(run.time == 100.0);
  }
  SUBCASE("slower than planned, the time ends the schedule") {
    while (!budget.finished()) {
      run.time += 1.5;
      budget.step_done();
    }
    CHECK(budget.out_of_time());
    CHECK(budget.steps_done() == 62);  // 10 + 78 s / 1.5 s
    CHECK(planned.current_step() == total);
    CHECK(run.optimizer.lr(0) == schedule->lr_at(total));
  }
}

TEST_CASE("TimeBudget: without a planned total only the time ends the run") {
  PacedRun run;
  train::TimeBudget budget = run.budget(10);
  nn::Scheduler scheduler(run.optimizer, cosine(1000));
  budget.pace(scheduler);
  int64_t steps = 0;
  while (!budget.finished()) {
    run.time += 3.0;
    budget.step_done();
    ++steps;
  }
  CHECK(steps == 4);
  CHECK(scheduler.current_step() == 4);
  CHECK(budget.out_of_time());
  CHECK(budget.seconds_left() == -2.0);
}

TEST_CASE("TimeBudget: a resumed run paces from the scheduler's step") {
  PacedRun run;
  const auto schedule = cosine(100);
  nn::Scheduler scheduler(run.optimizer, schedule);
  for (int s = 0; s < 40; ++s) scheduler.step();
  train::TimeBudget budget = run.budget(30);
  budget.pace(scheduler, 100);
  while (!budget.finished()) {
    run.time += 1.0;
    budget.step_done();
  }
  CHECK(budget.steps_done() == 30);  // 60 steps were left, 30 fit
  CHECK(scheduler.current_step() == 100);

  PacedRun finished_run;
  nn::Scheduler at_the_end(finished_run.optimizer, schedule);
  for (int s = 0; s < 100; ++s) at_the_end.step();
  train::TimeBudget nothing_left = finished_run.budget(30);
  nothing_left.pace(at_the_end, 100);
  CHECK(nothing_left.finished());
}

TEST_CASE("TimeBudget: every rank takes rank 0's clock, so all stop at the same step with the same rate") {
  // Two ranks in one process, rank 0 calling each collective first: what rank 0 measured goes
  // into the queue and comes out at rank 1, as the process group's broadcast hands it over.
  // Rank 1's clock runs slower and started later.
  double rank0_time = 0, rank1_time = 5;
  std::deque<double> broadcast;
  nn::SGD optimizer0({tensor({1.0}).requires_grad_(true)}, {.lr = 1.0});
  nn::SGD optimizer1({tensor({1.0}).requires_grad_(true)}, {.lr = 1.0});
  train::TimeBudget rank0({.seconds = 50, .clock = [&] { return rank0_time; }, .agree = [&](double value) {
                             broadcast.push_back(value);
                             return value;
                           }});
  train::TimeBudget rank1({.seconds = 50, .clock = [&] { return rank1_time; }, .agree = [&](double) {
                             REQUIRE(!broadcast.empty());
                             const double value = broadcast.front();
                             broadcast.pop_front();
                             return value;
                           }});
  nn::Scheduler scheduler0(optimizer0, cosine(100));
  nn::Scheduler scheduler1(optimizer1, cosine(100));
  rank0_time = 10;  // a plan, 10 s in: both ranks get rank 0's count
  rank1_time = 8;
  CHECK(rank0.steps_that_fit(1.0) == 40);
  CHECK(rank1.steps_that_fit(0.25) == 40);
  rank0.pace(scheduler0, 100);
  rank1.pace(scheduler1, 100);
  int64_t steps = 0;
  while (!rank0.finished() || !rank1.finished()) {
    REQUIRE(rank0.finished() == rank1.finished());
    rank0_time += 1.0;
    rank1_time += 0.7;
    rank0.step_done();
    rank1.step_done();
    ++steps;
    CHECK(scheduler0.current_step() == scheduler1.current_step());
    CHECK(optimizer0.lr(0) == optimizer1.lr(0));
  }
  CHECK(steps == 40);
  CHECK(rank1.out_of_time());
  CHECK(rank1.elapsed_seconds() == 50.0);
  CHECK(broadcast.empty());

  SUBCASE("in a process of its own, the process group's agreement is the reading itself") {
    double time = 0;
    train::TimeBudget alone({.seconds = 5, .clock = [&] { return time; }});
    time = 2.5;
    alone.step_done();
    CHECK(alone.elapsed_seconds() == 2.5);
    CHECK(alone.steps_that_fit(1.0) == 2);
  }
}

TEST_CASE("TimeBudget: refusals name the member and the value") {
  CHECK_THROWS_WITH_ALL(train::TimeBudget({.seconds = 0}), "TimeBudget", "positive number of seconds", "got 0");
  CHECK_THROWS_WITH_ALL(train::TimeBudget({.seconds = -60}), "TimeBudget", "got -60");
  PacedRun run;
  train::TimeBudget budget = run.budget(60);
  nn::Scheduler scheduler(run.optimizer, cosine(100));
  CHECK_THROWS_WITH_ALL(budget.pace(scheduler, -5), "TimeBudget.pace", "total_steps must be >= 0", "got -5");
  budget.pace(scheduler);
  run.time = 1;
  budget.step_done();
  CHECK_THROWS_WITH_ALL(budget.median_step_seconds(1), "TimeBudget.median_step_seconds", "1 step(s)",
                        "none left to time after the first 1");
  CHECK_THROWS_WITH_ALL(budget.median_step_seconds(-1), "TimeBudget.median_step_seconds", "untimed", "got -1");
  CHECK_THROWS_WITH_ALL(budget.steps_that_fit(0), "TimeBudget.steps_that_fit", "seconds_per_step must be > 0",
                        "got 0");
  CHECK_THROWS_WITH_ALL(budget.steps_that_fit(1, -1), "TimeBudget.steps_that_fit", "reserve_seconds", "got -1");
}
