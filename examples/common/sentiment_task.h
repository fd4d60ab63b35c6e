// The sentiment task that text_classifier and fine_tune_bert share: the sentences a run trains
// and is measured on (the test split, or a validation fold), the evaluation of a classifier on
// them, the line printed at the end of each epoch, and the attention heatmap of --predict.
#pragma once

#include <ember.h>

#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "file_names.h"
#include "options.h"

namespace ember::examples {

inline const char* const kSentimentLabels[] = {"negative", "positive"};

// The sentences a run is measured on: the test split, or with --validation-fold the fifth of
// the training sentences held out. `name` ("test" or "validation") labels the printed lines and
// the metrics CSV's columns, so a validation run can never be mistaken for a test figure.
struct MeasuredSplit {
  std::string name;
  std::vector<datasets::LabelledText> sentences;

  std::vector<int64_t> labels() const {
    std::vector<int64_t> out;
    for (const auto& sentence : sentences) out.push_back(sentence.label);
    return out;
  }
  std::vector<std::string> csv_columns() const { return {"train_loss", name + "_loss", name + "_accuracy", "lr"}; }
};

struct SentimentSplits {
  std::vector<datasets::LabelledText> train;
  MeasuredSplit measured;
};

// 3,000 labelled sentences; every fifth one is held out for the test (600). validation_fold K
// (1 to 5) holds out the K-th fifth of the 2,400 training sentences instead and measures on
// them: settings are chosen on these folds, never on the test. Prints how many of each.
inline SentimentSplits load_sentiment_splits(const std::string& data_dir, int64_t validation_fold) {
  const datasets::SentimentData data = datasets::load_sentiment(data_dir);
  SentimentSplits splits{data.train, {"test", data.test}};
  if (validation_fold > 0) {  // the test sentences stay unread
    datasets::FoldSplit<datasets::LabelledText> fold =
        datasets::cross_validation_fold(data.train, validation_fold - 1, /*folds=*/5);
    splits.train = std::move(fold.train);
    splits.measured = {"validation", std::move(fold.validation)};
  }
  fmt::print("sentences: {} train, {} {} ({} empty records dropped)\n", splits.train.size(),
             splits.measured.sentences.size(), splits.measured.name, data.empty_dropped + data.malformed_skipped);
  return splits;
}

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

// The classifier being trained, whichever it is: the module (parameters, modes, files) and its
// forward pass from padded ids and their padding mask (true = padding) to logits [batch, 2].
struct Classifier {
  std::shared_ptr<nn::Module> module;
  std::function<Tensor(const Tensor& ids, const Tensor& padding_mask)> forward;
};

// Loss and accuracy over a whole split, in eval mode (no dropout) and without autograd.
inline Evaluation evaluate(Classifier& classifier, const std::vector<std::vector<int64_t>>& ids,
                           const std::vector<int64_t>& labels, Device device) {
  nn::Module& model = *classifier.module;
  NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0;
  const int64_t count = static_cast<int64_t>(ids.size());
  // Under mpirun each rank evaluates every world_size-th chunk, and the sums are totalled.
  const int64_t first = 128 * distributed::rank(), stride = 128 * distributed::world_size();
  for (int64_t start = first; start < count; start += stride) {
    const int64_t end = std::min(count, start + 128);
    std::vector<int64_t> rows(end - start);
    std::iota(rows.begin(), rows.end(), start);
    const datasets::PaddedBatch batch = datasets::pad_batch(datasets::take(ids, rows), 0);
    const Tensor targets = tensor(datasets::take(labels, rows), {end - start}).to(device);
    const Tensor logits = classifier.forward(batch.ids.to(device), batch.padding_mask.to(device));
    loss_sum += cross_entropy(logits, targets, {.reduction = Reduction::Sum}).item<double>();
    correct += eq(argmax(logits, -1), targets).to(kInt64).sum().item<int64_t>();
  }
  model.train();
  const std::vector<double> totals = train::sum_over_ranks({loss_sum, static_cast<double>(correct)});
  return {totals[0] / count, totals[1] / count};
}

// The end of an epoch (or of training): the measured split's loss and accuracy, a row of the
// metrics CSV and a line above the progress bar.
inline Evaluation report_epoch(Classifier& classifier, const MeasuredSplit& split,
                               const std::vector<std::vector<int64_t>>& ids, Device device, int64_t step,
                               int64_t steps_per_epoch, double train_loss, double lr, train::MetricsLog& log,
                               train::ProgressBar& progress) {
  const Evaluation measured = evaluate(classifier, ids, split.labels(), device);
  log.write(step, {{"train_loss", train_loss}, {split.name + "_loss", measured.loss},
                   {split.name + "_accuracy", measured.accuracy}, {"lr", lr}});
  progress.print_line(fmt::format("epoch {:>2}  train loss {:.3f}  {} loss {:.3f}  {} accuracy {:.1f}%",
                                  (step + steps_per_epoch - 1) / steps_per_epoch, train_loss, split.name,
                                  measured.loss, split.name, 100 * measured.accuracy));
  return measured;
}

// The attention of one head of one layer over the sentence, as an SVG heatmap. One file per
// prediction: "attention-what-a-great-little-phone.svg", then "...-2.svg".
inline void draw_attention(const CommonOptions& common, const std::string& sentence, const Tensor& layer_weights,
                           const std::vector<std::string>& tokens, int64_t layer, int64_t head) {
  const Tensor weights = layer_weights.select(0, 0).select(0, head);  // [S, S] of [batch, heads, S, S]
  const std::string heatmap = unused_path(common.out_dir, "attention-" + slug(sentence), ".svg").string();
  train::write_heatmap_svg(heatmap, weights.cpu(), tokens, tokens,
                           fmt::format("\"{}\": layer {}, head {} (rows: queries, columns: keys)", sentence, layer,
                                       head));
  fmt::print("attention heatmap: {}\n", heatmap);
}

// --layer (negative counts from the last) and --head checked against the model's sizes; the
// layer's index from the first.
inline int64_t chosen_layer_index(int64_t layer, int64_t head, int64_t layers, int64_t heads) {
  EMBER_CHECK(layer >= -layers && layer < layers, "--layer: {} is not a layer of this {}-layer model", layer, layers);
  EMBER_CHECK(head >= 0 && head < heads, "--head: {} is not a head of this {}-head model", head, heads);
  return layer < 0 ? layer + layers : layer;
}

}  // namespace ember::examples
