// CUDA graphs (core/cuda_graph.h): a captured forward, backward and gradient clipping, replayed
// step after step with an optimizer step after each replay, gives the same losses and weights
// as the same steps run uncaptured, dropout included (each replay draws what the matching
// uncaptured step draws); a replay adds no host wait and no cudaMalloc; misuse is an Error.
#include <vector>

#include "helpers.h"
#include "parity.h"

namespace ember::testing::cuda {
namespace {

struct TinyModel {
  nn::Linear first{16, 32}, second{32, 5};
  std::vector<Tensor> parameters() {
    std::vector<Tensor> all = first.parameters();
    for (const Tensor& p : second.parameters()) all.push_back(p);
    return all;
  }
};

// Forward through dropout and GELU to a cross-entropy loss, backward, and clipping; the
// gradients are made anew each time (set undefined first), as after zero_grad(set_to_none).
Tensor step(TinyModel& model, const Tensor& x, const Tensor& targets) {
  for (Tensor& p : model.parameters()) p.mutable_grad() = Tensor();
  const Tensor hidden = dropout(gelu(model.first.forward(x)), 0.25);
  const Tensor loss = cross_entropy(model.second.forward(hidden), targets);
  loss.backward();
  nn::clip_grad_norm_(model.parameters(), 0.5);
  return loss;
}

struct Run {
  std::vector<double> losses;
  std::vector<Tensor> weights;
};

Run train(bool captured, uint64_t seed, int steps) {
  manual_seed(seed);
  TinyModel model;
  model.first.to(kGPU);
  model.second.to(kGPU);
  const Tensor x = randn({64, 16}).to(kGPU);
  const Tensor targets = randint(0, 5, {64}).to(kGPU);
  nn::SGD optimizer(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  Run run;
  run.losses.push_back(step(model, x, targets).item<double>());  // warm-up, uncaptured on both sides
  optimizer.step();
  if (!captured) {
    for (int s = 0; s < steps; ++s) {
      run.losses.push_back(step(model, x, targets).item<double>());
      optimizer.step();
    }
  } else {
    ember::cuda::CudaGraph graph;
    Tensor loss;
    graph.capture([&] { loss = step(model, x, targets); });
    const int64_t waits = ember::cuda::host_synchronizations();
    const int64_t mallocs = ember::cuda::memory_stats().cuda_malloc_calls;
    for (int s = 0; s < steps; ++s) {
      graph.replay();
      optimizer.step();
      CHECK(ember::cuda::host_synchronizations() == waits + s);  // only the loss's read below
      CHECK(ember::cuda::memory_stats().cuda_malloc_calls == mallocs);
      run.losses.push_back(loss.item<double>());
    }
  }
  for (const Tensor& p : model.parameters()) run.weights.push_back(p.cpu());
  return run;
}

TEST_CASE("a captured step replayed gives the losses and weights of the uncaptured steps, dropout included") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  const Run eager = train(false, seed, 4), graphed = train(true, seed, 4);
  REQUIRE(eager.losses.size() == graphed.losses.size());
  for (size_t s = 0; s < eager.losses.size(); ++s) {
    INFO("step " << s);
    CHECK(graphed.losses[s] == doctest::Approx(eager.losses[s]).epsilon(1e-5));
  }
  // The losses move: the replays did train, and drew new dropout masks.
  CHECK(graphed.losses[1] != graphed.losses[2]);
  for (size_t i = 0; i < eager.weights.size(); ++i) check_parity(graphed.weights[i], eager.weights[i], 1e-5, "weights");
}

TEST_CASE("CudaGraph misuse is a clear error") {
  ember::cuda::CudaGraph graph;
  CHECK_THROWS_WITH_AS(graph.replay(), doctest::Contains("nothing captured"), Error);
  const Tensor x = randn({8}).to(kGPU);
  // A host wait inside the step cannot be recorded.
  CHECK_THROWS_WITH_AS(graph.capture([&] { (void)sum(x).item<double>(); }), doctest::Contains("CudaGraph::capture"),
                       Error);
  CHECK_FALSE(graph.is_captured());
  CHECK_FALSE(ember::cuda::is_capturing_graph());
  // Nothing is left behind: ordinary work runs on.
  CHECK(sum(x).item<double>() == doctest::Approx(sum(x.cpu()).item<double>()));
  // An optimizer step inside a capture is refused.
  Tensor w = randn({4}).to(kGPU).requires_grad_(true);
  w.mutable_grad() = ones_like(w);
  nn::SGD optimizer({w}, {.lr = 0.1});
  ember::cuda::CudaGraph other;
  CHECK_THROWS_WITH_AS(other.capture([&] { optimizer.step(); }), doctest::Contains("cannot be captured"), Error);
}

}  // namespace
}  // namespace ember::testing::cuda
