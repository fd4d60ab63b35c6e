// A tiny TransformerClassifier trained for 100 steps three times from the same seed: in float32,
// under bfloat16 autocast, and under float16 autocast with a GradScaler. The 16-bit runs must
// learn as the float32 run does, and their loss curves must track its.
#include <numeric>
#include <tuple>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr int64_t kVocab = 12, kLength = 8, kExamples = 64, kSteps = 100;

// The task: does the sequence hold more tokens from the lower half of the vocabulary than from
// the upper half? (Lengths are even; ties go to class 0.) Token 0 is padding and never drawn.
struct Task {
  Tensor ids;     // [kExamples, kLength] int64
  Tensor labels;  // [kExamples] int64
};

Task make_task() {
  manual_seed(11);
  const Tensor ids = randint(1, kVocab, {kExamples, kLength});
  const Tensor lower = sum(lt(ids, static_cast<double>(kVocab / 2 + 1)).to(kInt64), {1});
  return {ids, gt(lower, static_cast<double>(kLength / 2)).to(kInt64)};
}

// The losses of kSteps full-batch Adam steps from the same initial weights, in `precision`.
std::vector<double> losses_of_run(const Task& task, train::Precision precision) {
  manual_seed(0);
  nn::TransformerClassifier model({.vocab_size = kVocab,
                                   .max_len = kLength,
                                   .num_classes = 2,
                                   .num_layers = 1,
                                   .layer = {.d_model = 32, .num_heads = 2, .d_ff = 64, .dropout = 0.0},
                                   .padding_idx = 0});
  nn::Adam optimizer(model.parameters(), {.lr = 3e-4});
  nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});
  std::vector<double> losses;
  for (int64_t step = 0; step < kSteps; ++step) {
    Tensor loss;
    {
      const AutocastGuard autocast = train::autocast_scope(precision, DeviceType::CPU);
      loss = nn::cross_entropy(model.forward(task.ids), task.labels);
    }
    REQUIRE(loss.dtype() == kFloat32);
    optimizer.zero_grad();
    scaler.scale(loss).backward();
    scaler.step(optimizer);
    scaler.update();
    losses.push_back(loss.item());
  }
  for (const Tensor& p : model.parameters()) REQUIRE(p.dtype() == kFloat32);  // master weights
  return losses;
}

double mean_of(const std::vector<double>& values, size_t from, size_t to) {
  return std::accumulate(values.begin() + static_cast<std::ptrdiff_t>(from),
                         values.begin() + static_cast<std::ptrdiff_t>(to), 0.0) /
         static_cast<double>(to - from);
}

// The mean absolute difference of two loss curves over their last `count` steps.
double tail_difference(const std::vector<double>& a, const std::vector<double>& b, size_t count) {
  double total = 0;
  for (size_t i = a.size() - count; i < a.size(); ++i) total += std::abs(a[i] - b[i]);
  return total / static_cast<double>(count);
}

}  // namespace

TEST_CASE("mixed precision: bf16 and fp16 training track the float32 run of a tiny classifier") {
  const Task task = make_task();
  const std::vector<double> float32 = losses_of_run(task, train::Precision::Float32);
  const std::vector<double> bfloat16 = losses_of_run(task, train::Precision::BFloat16);
  const std::vector<double> float16 = losses_of_run(task, train::Precision::Float16);
  MESSAGE("first loss ", float32[0], "; mean of the last 20: float32 ", mean_of(float32, kSteps - 20, kSteps),
          ", bfloat16 ", mean_of(bfloat16, kSteps - 20, kSteps), ", float16 ", mean_of(float16, kSteps - 20, kSteps),
          "; mean |difference| from float32 over them: bfloat16 ", tail_difference(bfloat16, float32, 20),
          ", float16 ", tail_difference(float16, float32, 20));

  // Every run learns: the mean of the last 20 losses is below half of the first loss (the
  // learning rate is low enough that the loss is still falling at step 100, where differences
  // between the runs show, rather than flat near 0, where they would vanish).
  for (const auto* losses : {&float32, &bfloat16, &float16}) {
    CHECK(mean_of(*losses, kSteps - 20, kSteps) < 0.5 * (*losses)[0]);
  }

  // The tolerance, for a format of rounding unit u (bfloat16 2^-8, float16 2^-11): a product's
  // 16-bit operands and result each carry a relative error up to u, so the logits, and the
  // float32 loss computed from them, move by a few u relative to the loss: take 4u times the
  // initial loss. Over training each step's update moves by a few u relative to itself too; the
  // differences in the weights stay of that order while the loss falls, as long as no step
  // goes astray (a wrong gradient, a stalled scaler), which would cost far more than 4u of it.
  // Measured on this task: bfloat16 differs by about 1% of its bound, float16 by about 2%.
  for (const auto& [losses, u, name] :
       {std::tuple{&bfloat16, 0x1p-8, "bfloat16"}, std::tuple{&float16, 0x1p-11, "float16"}}) {
    CAPTURE(name);
    const double tolerance = 4 * u * float32[0];
    CHECK(std::abs((*losses)[0] - float32[0]) <= tolerance);
    CHECK(tail_difference(*losses, float32, 20) <= tolerance);
  }
  // And bfloat16 did compute in bfloat16: its curve is not float32's.
  CHECK(tail_difference(bfloat16, float32, 20) > 0);
}
