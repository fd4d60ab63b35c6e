// Training steps replayed as CUDA graphs, one graph per batch shape (core/cuda_graph.h): what
// lets a loop over bucketed batches, a few shapes over and over, launch each step as one graph.
//
//   train::GraphedSteps steps([&](std::span<const Tensor> batch) {
//     optimizer.zero_grad();
//     Tensor loss = nn::cross_entropy(model->forward(batch[0]), batch[1]);
//     loss.backward();
//     optimizer.step();
//     return loss;
//   });
//   for (...) {
//     const Tensor loss = steps({ids.to(device), labels.to(device)});
//     scheduler.step();                  // outside the step: the graph reads the rate at replay
//     progress.update(step, {{"loss", loss.item()}});
//   }
//
// The first batch of a shape runs op by op: a warm-up that makes the optimizer's state and the
// library's handles, which a capture cannot make. The second is captured, then replayed; later
// ones are copied into that graph's inputs and replayed. Each graph keeps its own memory (the
// step's activations), so shapes past max_graphs run op by op instead. On the CPU, or with
// enabled false, every step runs op by op. A graph records addresses: load checkpoints and
// build the optimizer before the first step, and read a replayed step's loss before the next
// step of the same shape overwrites it. The gradients a replay computes live in its graph's
// memory and are used up inside the step (clipping, the optimizer); read them there, not after.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/cuda_graph.h"
#include "core/error.h"
#include "core/tensor.h"

namespace ember::train {

struct GraphedStepsOptions {
  bool enabled = true;     // false: every step op by op (--no-cuda-graphs in the examples)
  size_t max_graphs = 32;  // shapes beyond this many run op by op
};

// What happened to one call, for the loop's own reports and for tests.
enum class StepRun { kOpByOp, kCaptured, kReplayed };

// Whether a `Graph` can record a step on `device`: a CUDA graph records CUDA work only. The
// tests specialise it for a stand-in graph that runs on the CPU.
template <class Graph>
bool graph_records(Device device) {
  return device.is_cuda();
}

// `Graph` is cuda::CudaGraph (GraphedSteps, below); the tests give a stand-in.
template <class Graph>
class BasicGraphedSteps {
 public:
  using Step = std::function<Tensor(std::span<const Tensor> batch)>;

  explicit BasicGraphedSteps(Step step, GraphedStepsOptions options = {})
      : step_(std::move(step)), options_(options) {}

  // One training step on `batch` (every tensor on one device); returns its loss.
  Tensor operator()(std::span<const Tensor> batch) {
    if (!options_.enabled || batch.empty() || !graph_records<Graph>(batch.front().device())) {
      return run_op_by_op(batch);
    }
    Shape& entry = shapes_[signature(batch)];
    if (!entry.graph) {
      if (entry.seen++ == 0 || graphs_ >= options_.max_graphs) return run_op_by_op(batch);
      capture(entry, batch);
      last_run_ = StepRun::kCaptured;
    } else {
      NoGradGuard no_grad;
      for (size_t i = 0; i < batch.size(); ++i) entry.inputs[i].copy_(batch[i]);
      last_run_ = StepRun::kReplayed;
    }
    entry.graph->replay();
    return entry.loss;
  }
  Tensor operator()(std::initializer_list<Tensor> batch) {
    return (*this)(std::span<const Tensor>(batch.begin(), batch.size()));
  }

  size_t graphs() const { return graphs_; }
  StepRun last_run() const { return last_run_; }

 private:
  struct Shape {
    int64_t seen = 0;
    std::unique_ptr<Graph> graph;
    std::vector<Tensor> inputs;  // the graph's static inputs, each batch copied into them
    Tensor loss;                 // the graph's static output
  };

  // Shapes, dtypes and devices of the batch: "[32, 17] int64 cuda:0; [32] int64 cuda:0".
  static std::string signature(std::span<const Tensor> batch) {
    std::string key;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Tensor& t = batch[i];
      EMBER_CHECK(t.defined(), "GraphedSteps: batch tensor {} is undefined", i);
      EMBER_CHECK(t.device() == batch.front().device(), "GraphedSteps: batch tensor 0 is on {} but tensor {} on {}; a "
                  "step's tensors must share one device", batch.front().device().str(), i, t.device().str());
      key += fmt::format("{}{} {} {}", i == 0 ? "" : "; ", shape_str(t.sizes()), t.dtype(), t.device().str());
    }
    return key;
  }

  Tensor run_op_by_op(std::span<const Tensor> batch) {
    last_run_ = StepRun::kOpByOp;
    return step_(batch);
  }

  // A capture that throws leaves the entry as it found it (no inputs, no loss), so the next batch
  // of this shape tries again from scratch; what the step changed outside the graph (gradients,
  // the optimizer's captured mark) is put back by the graph's own rollback (core/capture_rollback.h).
  void capture(Shape& entry, std::span<const Tensor> batch) {
    {
      NoGradGuard no_grad;
      for (const Tensor& t : batch) entry.inputs.push_back(t.detach().clone());
    }
    auto graph = std::make_unique<Graph>();
    try {
      graph->capture([&] { entry.loss = step_(entry.inputs); }, batch.front().device().index);
    } catch (...) {
      entry.inputs.clear();
      entry.loss = Tensor();
      throw;
    }
    entry.graph = std::move(graph);
    ++graphs_;
  }

  Step step_;
  GraphedStepsOptions options_;
  std::map<std::string, Shape> shapes_;
  size_t graphs_ = 0;
  StepRun last_run_ = StepRun::kOpByOp;
};

using GraphedSteps = BasicGraphedSteps<cuda::CudaGraph>;

}  // namespace ember::train
