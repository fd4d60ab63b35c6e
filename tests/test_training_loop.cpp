// The nn/train/ helpers together, as an example's loop uses them: a run stopped after a
// checkpoint and resumed with --resume ends where an uninterrupted run ends, with one metrics
// row per step and its plot beside the CSV.
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "helpers.h"
#include "scratch_files.h"
#include "nn/train/train.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr int64_t kTotalSteps = 8, kEvalEvery = 2;

// Learns y = x1 + x2 + x3 from random batches drawn from ember's generator, which a resumed
// run must restore to draw the same batches.
struct Run {
  nn::Linear model{3, 1};
  nn::SGD optimizer{model.parameters(), {.lr = 0.05, .momentum = 0.9}};

  double train_step() {
    const Tensor x = randn({16, 3});
    const Tensor y = sum(x, {1}, true);
    optimizer.zero_grad();
    const Tensor loss = mean(pow(sub(model.forward(x), y), 2.0));
    loss.backward();
    optimizer.step();
    return loss.item();
  }

  // Trains until `stop_after` (a run killed there), from a checkpoint when `resume` asks.
  void train(const ScratchDir& out, std::ostream& console, int64_t stop_after, bool resume) {
    train::CheckpointSaver saver(out.file("checkpoint.safetensors"), kEvalEvery, model, optimizer, nullptr);
    std::optional<int64_t> resumed;
    if (resume) resumed = train::resume_from(saver.path(), model, optimizer, nullptr);
    const int64_t start = resumed.value_or(0);
    train::MetricsLog log(out.file("metrics.csv"), {"train_loss", "val_loss"}, resumed);
    train::ProgressBar progress(kTotalSteps, {.label = "train", .unit = "samples", .bar_stream = &console,
                                              .message_stream = &console},
                                start);
    for (int64_t step = start + 1; step <= stop_after; ++step) {
      const double loss = train_step();
      progress.update(step, {{"loss", loss}}, 16);
      train::MetricValues values = {{"train_loss", loss}};
      if (step % kEvalEvery == 0) {
        NoGradGuard no_grad;
        const Tensor x = tensor({1.0f, 2.0f, 3.0f}, {1, 3});
        const double val_loss = std::pow(model.forward(x).item() - 6.0, 2);
        values.emplace_back("val_loss", val_loss);
        progress.print_line(fmt::format("step {}: val loss {:.4f}", step, val_loss));
        saver.maybe_save(step);
      }
      log.write(step, values);
    }
    progress.finish();
    train::plot_metrics_csv(log.path(), "tiny regression");
  }
};

}  // namespace

TEST_CASE("a run stopped after a checkpoint and resumed ends as an uninterrupted one, its metrics whole") {
  ScratchDir uninterrupted_out("loop_uninterrupted"), interrupted_out("loop_interrupted");
  std::ostringstream console;

  manual_seed(11);
  Run uninterrupted;
  uninterrupted.train(uninterrupted_out, console, kTotalSteps, false);

  manual_seed(11);
  {
    Run first;
    first.train(interrupted_out, console, 5, false);  // killed after step 5; the checkpoint is from step 4
  }
  manual_seed(12);  // another process: a different initialisation, all replaced by the checkpoint
  Run resumed;
  resumed.train(interrupted_out, console, kTotalSteps, true);

  CHECK(resumed.model.weight.to_vector<float>() == uninterrupted.model.weight.to_vector<float>());
  CHECK(resumed.model.bias.to_vector<float>() == uninterrupted.model.bias.to_vector<float>());

  // Step 5's row from before the stop was dropped and written again by the resumed run.
  const train::MetricsTable table = train::read_metrics_csv(interrupted_out.file("metrics.csv"));
  const train::MetricsTable reference = train::read_metrics_csv(uninterrupted_out.file("metrics.csv"));
  REQUIRE(table.rows.size() == static_cast<size_t>(kTotalSteps));
  for (size_t i = 0; i < table.rows.size(); ++i) CHECK(table.rows[i][0] == static_cast<double>(i + 1));
  CHECK(table.series("train_loss") == reference.series("train_loss"));
  CHECK(table.series("val_loss").size() == 4);
  CHECK(std::filesystem::exists(interrupted_out.file("metrics.svg")));

  const std::string printed = console.str();
  CHECK(printed.find("step 4: val loss") != std::string::npos);
  CHECK(printed.find("train 8/8 (100%)") != std::string::npos);
}
