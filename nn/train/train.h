// ember::train, the helpers a training loop is made of, in one include: progress bar,
// metrics CSV, SVG plots, run files and checkpoints, --device/--threads/--precision, BLEU and
// edit distance, steps replayed as CUDA graphs, and time budgets.
//
// How an example puts them together (examples/common/ holds the command-line side):
//
//   int main(int argc, char** argv) {
//     CLI::App app{"Train a small classifier"};
//     examples::CommonOptions common{.out_dir = "out/classifier"};
//     examples::add_common_options(app, common);
//     int64_t steps = 1000, eval_every = 100;
//     app.add_option("--steps", steps, "training steps")->capture_default_str();
//     return examples::run_main(app, argc, argv, common, [&] {
//       const Device device = examples::setup_run(common);   // --device, --threads, --seed, --out
//       auto model = std::make_shared<nn::TransformerClassifier>(options);
//       model->to(device);
//       nn::AdamW optimizer(model->parameters(), {.lr = 1e-3});
//       nn::Scheduler scheduler(optimizer, std::make_shared<nn::WarmupCosine>(1e-3, 100, steps));
//
//       train::CheckpointSaver saver(common.out_path("checkpoint.safetensors"), eval_every, *model, optimizer, &scheduler);
//       std::optional<int64_t> resumed;
//       if (common.resume) {
//         std::string found;  // what --resume found, for the log
//         resumed = train::resume_from(saver.path(), *model, optimizer, &scheduler, &found);
//         fmt::print("--resume: {}\n", found);
//       }
//       const int64_t start = resumed.value_or(0);
//       train::MetricsLog log(common.out_path("metrics.csv"), {"train_loss", "val_loss", "accuracy", "lr"}, resumed);
//
//       train::ProgressBar progress(steps, {.label = "train", .unit = "samples"}, start);
//       for (int64_t step = start + 1; step <= steps; ++step) {
//         const Batch batch = next_batch();
//         optimizer.zero_grad();
//         const Tensor loss = nn::cross_entropy(model->forward(batch.ids), batch.labels);
//         loss.backward();
//         optimizer.step();
//         scheduler.step();
//         progress.update(step, {{"loss", loss.item()}}, batch.size);
//         if (step % eval_every == 0) {
//           const Evaluation eval = evaluate(*model);
//           log.write(step, {{"train_loss", loss.item()}, {"val_loss", eval.loss}, {"accuracy", eval.accuracy}});
//           progress.print_line(fmt::format("step {}: val loss {:.3f}, accuracy {:.1f}%", step, eval.loss,
//                                           100 * eval.accuracy));
//           saver.maybe_save(step);
//         }
//       }
//       progress.finish();
//       train::plot_metrics_csv(log.path(), "classifier");   // out/classifier/metrics.svg
//     });   // then run_main lists the files written under out/classifier/
//   }
#pragma once

#include "nn/train/bleu.h"
#include "nn/train/checkpoint.h"
#include "nn/train/device_option.h"
#include "nn/train/edit_distance.h"
#include "nn/train/graphed_steps.h"
#include "nn/train/metrics_log.h"
#include "nn/train/precision_option.h"
#include "nn/train/progress_bar.h"
#include "nn/train/run_files.h"
#include "nn/train/sum_over_ranks.h"
#include "nn/train/svg_plot.h"
#include "nn/train/time_budget.h"
