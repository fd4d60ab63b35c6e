// train::GraphedSteps' bookkeeping, checked on the CPU with a stand-in graph whose replay runs
// the recorded step again: which calls run op by op, are captured or replayed, one graph per
// batch shape up to max_graphs, and each replay reading the batch copied into the graph's inputs.
#include <vector>

#include "helpers.h"
#include "core/capture_rollback.h"
#include "nn/train/graphed_steps.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Records the step at capture without running it, as a CUDA graph capture records kernels
// without running them; each replay runs it.
struct StandInGraph {
  std::function<void()> recorded;
  void capture(const std::function<void()>& step, int /*device*/) { recorded = step; }
  void replay() { recorded(); }
};

}  // namespace

template <>
bool ember::train::graph_records<StandInGraph>(Device) {
  return true;
}

namespace {

using Steps = train::BasicGraphedSteps<StandInGraph>;

// A step whose loss is twice the sum of the batch's first tensor, counting its runs: a replay
// that read stale inputs gives a wrong loss.
struct CountingStep {
  int calls = 0;
  Tensor operator()(std::span<const Tensor> batch) {
    ++calls;
    return mul(sum(batch[0]), 2.0);
  }
};

Tensor batch_of(int64_t rows, double value) { return full({rows, 3}, value, kFloat64); }

}  // namespace

TEST_CASE("GraphedSteps: op by op first, then captured, then replayed, one graph per shape") {
  CountingStep counter;
  Steps steps([&](std::span<const Tensor> batch) { return counter(batch); }, {.max_graphs = 2});
  struct Call {
    int64_t rows;
    train::StepRun expected;
  };
  const std::vector<Call> calls = {
      {2, train::StepRun::kOpByOp},   {2, train::StepRun::kCaptured}, {2, train::StepRun::kReplayed},
      {4, train::StepRun::kOpByOp},   {2, train::StepRun::kReplayed}, {4, train::StepRun::kCaptured},
      {4, train::StepRun::kReplayed}, {5, train::StepRun::kOpByOp},   {5, train::StepRun::kOpByOp},  // past max_graphs
      {2, train::StepRun::kReplayed},
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    CAPTURE(i);
    const double value = 1.0 + static_cast<double>(i);  // a new batch each time
    const Tensor loss = steps({batch_of(calls[i].rows, value), tensor<int64_t>({1}, {1})});
    CHECK(steps.last_run() == calls[i].expected);
    CHECK(loss.item<double>() == 2.0 * 3.0 * static_cast<double>(calls[i].rows) * value);
  }
  CHECK(steps.graphs() == 2);
  CHECK(counter.calls == static_cast<int>(calls.size()));  // a capture records; its replay runs
}

TEST_CASE("GraphedSteps: disabled, or on a device its graph cannot record, every step runs op by op") {
  CountingStep counter;
  Steps disabled([&](std::span<const Tensor> batch) { return counter(batch); }, {.enabled = false});
  train::GraphedSteps on_cpu([&](std::span<const Tensor> batch) { return counter(batch); });
  for (int i = 0; i < 3; ++i) {
    CHECK(disabled({batch_of(2, 1.0)}).item<double>() == 12.0);
    CHECK(disabled.last_run() == train::StepRun::kOpByOp);
    CHECK(on_cpu({batch_of(2, 1.0)}).item<double>() == 12.0);
    CHECK(on_cpu.last_run() == train::StepRun::kOpByOp);
  }
  CHECK(disabled.graphs() == 0);
  CHECK(on_cpu.graphs() == 0);
  CHECK(counter.calls == 6);
}

TEST_CASE("GraphedSteps: an undefined batch tensor is an error naming it") {
  Steps steps([](std::span<const Tensor> batch) { return sum(batch[0]); });
  CHECK_THROWS_WITH_AS(steps({batch_of(2, 1.0), Tensor()}), doctest::Contains("batch tensor 1 is undefined"), Error);
}

namespace {

// Runs the step while it "captures", inside a CaptureRollback, as CudaGraph::capture does: a
// step that throws there fails the capture, and the rollback undoes what it assigned.
struct RunningGraph {
  std::function<void()> recorded;
  void capture(const std::function<void()>& step, int /*device*/) {
    cuda::CaptureRollback rollback;
    step();
    recorded = step;
    rollback.commit();
  }
  void replay() { recorded(); }
};

}  // namespace

template <>
bool ember::train::graph_records<RunningGraph>(Device) {
  return true;
}

TEST_CASE("GraphedSteps: a capture that throws leaves nothing behind, and the next batch captures afresh") {
  Tensor weight = full({3}, 2.0, TensorOptions(kFloat64).requires_grad(true));
  bool fail_next_capture = false;
  std::vector<size_t> batch_sizes;
  train::BasicGraphedSteps<RunningGraph> steps([&](std::span<const Tensor> batch) {
    batch_sizes.push_back(batch.size());
    weight.mutable_grad() = Tensor();
    Tensor loss = sum(mul(batch[0], weight));
    loss.backward();
    if (fail_next_capture) {
      fail_next_capture = false;
      throw Error("the step failed");
    }
    return loss;
  });
  const Tensor batch = full({2, 3}, 1.0, kFloat64);
  CHECK(steps({batch}).item<double>() == 12.0);  // op by op: the warm-up
  CHECK(weight.grad().defined());
  fail_next_capture = true;
  CHECK_THROWS_WITH_AS(steps({batch}), doctest::Contains("the step failed"), Error);
  CHECK(steps.graphs() == 0);
  // The step dropped the gradient, then its backward assigned one in the graph's memory: the
  // rollback undid that assignment, so the weight holds no gradient of the failed capture.
  CHECK_FALSE(weight.grad().defined());
  // Captured again, with one input tensor, not the failed capture's plus a new one.
  CHECK(steps({batch}).item<double>() == 12.0);
  CHECK(steps.last_run() == train::StepRun::kCaptured);
  CHECK(steps.graphs() == 1);
  CHECK(batch_sizes == std::vector<size_t>{1, 1, 1, 1});  // warm-up, failed capture, capture, its replay
}
