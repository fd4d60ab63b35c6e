// CUDA graphs (core/cuda_graph.h): a whole training step captured (forward, dropout, backward,
// gradient clipping and the optimizer's step, SGD with momentum or AdamW) and replayed with a
// learning rate that changes before every replay gives the same losses and weights as the same
// steps run uncaptured (each replay draws the dropout masks the matching uncaptured step draws,
// reads the rate set before it and counts its step); a replay adds no host wait and no
// cudaMalloc; misuse is an Error. train::GraphedSteps trains an encoder-decoder on batches of two
// shapes, one graph each, as op-by-op training does.
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "helpers.h"
#include "noise_gradients.h"
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
  std::vector<Tensor> weights;  // on the GPU, where training left them
  double adam_step_count = 0;
};

enum class Optim { SGDMomentum, AdamW };

std::unique_ptr<nn::Optimizer> make_optimizer(Optim kind, std::vector<Tensor> parameters) {
  if (kind == Optim::AdamW) return std::make_unique<nn::AdamW>(parameters, nn::AdamWOptions{.lr = 0.01});
  return std::make_unique<nn::SGD>(parameters, nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
}

// The rate before step s, as a schedule would set it: a different one each step.
double rate(Optim kind, int s) { return (kind == Optim::AdamW ? 0.01 : 0.1) * (1.0 - 0.15 * s); }

Run train(bool captured, Optim kind, uint64_t seed, int steps) {
  manual_seed(seed);
  TinyModel model;
  model.first.to(kGPU);
  model.second.to(kGPU);
  const Tensor x = randn({64, 16}).to(kGPU);
  const Tensor targets = randint(0, 5, {64}).to(kGPU);
  const std::unique_ptr<nn::Optimizer> optimizer = make_optimizer(kind, model.parameters());
  const auto training_step = [&] {
    Tensor loss = step(model, x, targets);
    optimizer->step();
    return loss;
  };
  Run run;
  // A warm-up step, uncaptured on both sides: it makes the optimizer's state.
  run.losses.push_back(training_step().item<double>());
  if (!captured) {
    for (int s = 0; s < steps; ++s) {
      optimizer->set_lr(0, rate(kind, s));
      run.losses.push_back(training_step().item<double>());
    }
  } else {
    ember::cuda::CudaGraph graph;
    Tensor loss;
    graph.capture([&] { loss = training_step(); });
    const int64_t waits = ember::cuda::host_synchronizations();
    const int64_t mallocs = ember::cuda::memory_stats().cuda_malloc_calls;
    for (int s = 0; s < steps; ++s) {
      optimizer->set_lr(0, rate(kind, s));  // read by the replay, from device memory
      graph.replay();
      CHECK(ember::cuda::host_synchronizations() == waits + s);  // only the loss's read below
      CHECK(ember::cuda::memory_stats().cuda_malloc_calls == mallocs);
      run.losses.push_back(loss.item<double>());
    }
  }
  for (const Tensor& p : model.parameters()) run.weights.push_back(p.detach().clone());  // left on the GPU
  if (kind == Optim::AdamW) run.adam_step_count = optimizer->state_dict().at("state.0.step").item<double>();
  return run;
}

void check_same_training(Optim kind) {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  const Run eager = train(false, kind, seed, 4), graphed = train(true, kind, seed, 4);
  REQUIRE(eager.losses.size() == graphed.losses.size());
  for (size_t s = 0; s < eager.losses.size(); ++s) {
    INFO("step " << s);
    CHECK(graphed.losses[s] == doctest::Approx(eager.losses[s]).epsilon(1e-5));
  }
  // The losses move: the replays did train, and drew new dropout masks.
  CHECK(graphed.losses[1] != graphed.losses[2]);
  for (size_t i = 0; i < eager.weights.size(); ++i) check_parity(graphed.weights[i], eager.weights[i].cpu(), 1e-5, "weights");
  CHECK(graphed.adam_step_count == eager.adam_step_count);  // each replay counted its step
}

TEST_CASE("a captured training step replayed gives the losses and weights of the uncaptured steps") {
  SUBCASE("SGD with momentum") { check_same_training(Optim::SGDMomentum); }
  SUBCASE("AdamW") { check_same_training(Optim::AdamW); }
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
  // An optimizer's first step makes its state: it cannot be captured.
  Tensor w = randn({4}).to(kGPU).requires_grad_(true);
  w.mutable_grad() = ones_like(w);
  nn::SGD optimizer({w}, {.lr = 0.1, .momentum = 0.9});
  ember::cuda::CudaGraph first;
  CHECK_THROWS_WITH_AS(first.capture([&] { optimizer.step(); }), doctest::Contains("run one step uncaptured"), Error);
  // After a warm-up step it can; hyper-parameters cannot change during the capture, and only the
  // learning rate may change after it.
  optimizer.step();
  ember::cuda::CudaGraph graph_of_steps;
  CHECK_THROWS_WITH_AS(graph_of_steps.capture([&] { optimizer.set_lr(0, 0.5); }),
                       doctest::Contains("while a CUDA graph is captured"), Error);
  ember::cuda::CudaGraph captured;
  captured.capture([&] { optimizer.step(); });
  optimizer.set_lr(0, 0.05);
  CHECK_THROWS_WITH_AS(optimizer.set_option(0, "momentum", 0.5), doctest::Contains("only 'lr' is read"), Error);
}

}  // namespace
}  // namespace ember::testing::cuda

namespace ember::testing::cuda {
namespace {

// A small encoder-decoder trained through train::GraphedSteps on batches of two shapes, with
// what the translation example's step has: padding in source and target, the causal mask, label
// smoothing with ignored padding, clipping and AdamW under a changing learning rate. Returns the
// losses and the final weights, by name.
struct TranslationRun {
  std::vector<double> losses;
  std::vector<std::pair<std::string, Tensor>> weights;  // on the GPU
};

constexpr int kTranslationSteps = 9;
double translation_lr(int s) { return 1e-3 * (1.0 + 0.1 * s); }

TranslationRun translate(bool graphs, uint64_t seed, DType dtype) {
  manual_seed(seed);
  nn::TransformerOptions options;
  options.source_vocab_size = options.target_vocab_size = 24;
  options.share_embeddings = true;
  options.max_len = 32;
  options.num_encoder_layers = options.num_decoder_layers = 1;
  options.layer = {.d_model = 16, .num_heads = 2, .d_ff = 32, .dropout = 0.1, .norm_first = true};
  options.pad_id = 0;
  nn::Transformer model(options);
  model.to(dtype);
  model.to(kGPU);
  nn::AdamW optimizer(model.parameters(), {.lr = 1e-3});
  train::GraphedSteps steps(
      [&](std::span<const Tensor> batch) {
        const Tensor& target = batch[1];
        const int64_t length = target.size(1) - 1;
        optimizer.zero_grad();
        const Tensor logits = model.forward(batch[0], target.narrow(1, 0, length));
        Tensor loss = nn::cross_entropy(logits, target.narrow(1, 1, length).contiguous(),
                                        {.ignore_index = 0, .label_smoothing = 0.1});
        loss.backward();
        nn::clip_grad_norm_(model.parameters(), 1.0);
        optimizer.step();
        return loss;
      },
      {.enabled = graphs});
  TranslationRun run;
  for (int s = 0; s < kTranslationSteps; ++s) {
    const int64_t length = s % 3 == 0 ? 8 : 16;  // two shapes, interleaved
    Tensor source = randint(1, 24, {4, length});
    Tensor target = randint(1, 24, {4, length});
    source.narrow(1, length - 3, 3).narrow(0, 0, 2).fill_(0);  // padding at the end of two rows
    target.narrow(1, length - 2, 2).narrow(0, 1, 2).fill_(0);
    optimizer.set_lr(0, translation_lr(s));
    run.losses.push_back(steps({source.to(kGPU), target.to(kGPU)}).item<double>());
    if (graphs && s >= 4) CHECK(steps.last_run() == train::StepRun::kReplayed);
  }
  if (graphs) CHECK(steps.graphs() == 2);
  for (const auto& [name, p] : model.named_parameters()) run.weights.emplace_back(name, p.detach().clone());
  return run;
}

// Replayed and op-by-op steps run the same kernels, but the embedding's backward adds repeated
// ids with atomics, in an order that varies from run to run, and in float32 such rounding
// differences grow over a few steps of training (test_cuda_models measures how far). So the
// float32 runs are held to their losses, and the weights are compared in float64, where the
// same growth stays far below 1e-9. k_proj.bias, whose gradient is rounding noise
// (tests/noise_gradients.h), may be moved apart by up to lr * adam_step_bound(t) per element
// per step on each side.
TEST_CASE("an encoder-decoder step through GraphedSteps, two batch shapes, matches op-by-op training") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  for (const DType dtype : {kFloat32, kFloat64}) {
    INFO("dtype " << dtype_name(dtype));
    const TranslationRun eager = translate(false, seed, dtype), graphed = translate(true, seed, dtype);
    const double loss_tolerance = dtype == kFloat32 ? 1e-4 : 1e-9;
    for (size_t s = 0; s < eager.losses.size(); ++s) {
      INFO("step " << s);
      CHECK(graphed.losses[s] == doctest::Approx(eager.losses[s]).epsilon(loss_tolerance));
    }
    if (dtype == kFloat32) continue;
    double noise_distance = 0;
    for (int s = 0; s < kTranslationSteps; ++s) noise_distance += 2 * adam_step_bound(s + 1) * translation_lr(s);
    for (size_t i = 0; i < eager.weights.size(); ++i) {
      const auto& [name, weight] = eager.weights[i];
      const Tensor& replayed = graphed.weights[i].second;
      if (!softmax_invariant(name)) {
        check_parity(replayed, weight.cpu(), 1e-9, "weights: " + name);
        continue;
      }
      const Tensor apart = sub(replayed, weight);
      const double distance = std::sqrt(sum(mul(apart, apart)).item<double>());
      const double allowed = noise_distance * std::sqrt(static_cast<double>(weight.numel()));
      CHECK_MESSAGE(distance <= allowed, name << ": |graphed - eager| = " << distance << " > " << allowed);
    }
  }
}

}  // namespace
}  // namespace ember::testing::cuda
