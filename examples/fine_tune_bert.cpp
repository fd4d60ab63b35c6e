// Fine-tuning BERT on the sentiment sentences: the second half of the transfer-learning lesson of
// "NLP with Transformers". pretrain_bert taught a small BERT plain English; here a classification
// head on its [CLS] state learns from the 2,400 labelled sentences that text_classifier's
// transformer learned from scratch, and the same network trained from random weights shows what
// the pretraining brought.
//
//   bash scripts/fetch_data.sh sentiment bert-vocab
//   ./build/examples/fine_tune_bert --init-from out/pretrain_bert                   # fine-tuning
//   ./build/examples/fine_tune_bert --init-from out/pretrain_bert --freeze-encoder  # the linear probe
//   ./build/examples/fine_tune_bert --config-from out/pretrain_bert                 # the same network from scratch
//   ./build/examples/fine_tune_bert                                 # from scratch on BERT's 30,522 pieces
//   ./build/examples/fine_tune_bert --predict "What a great little phone!"
//
// The recipe, stage by stage:
//   1. Data: text_classifier's splits (examples/common/sentiment_task.h), --validation-fold too.
//   2. Word pieces: a sentence is read as BERT reads it, [CLS] word pieces [SEP], at most 64
//      pieces (or the model's position count), cut before the end with [SEP] kept last; the
//      pieces are the --init-from folder's vocab.txt, or --vocab, or BERT's uncased vocabulary.
//   3. Model: BertForSequenceClassification, the pooled [CLS] state and a linear layer to the two
//      classes. With --init-from its encoder is the pretrained one and the head starts fresh;
//      without, the small BERT pretrain_bert pretrains (examples/common/small_bert.h), or the
//      one --config-from describes, from random weights.
//   4. Training: AdamW, the head at --lr, the pretrained encoder at half of it
//      (--encoder-lr-factor), after a one-epoch warm-up: large early updates would wash out what
//      pretraining put there. A cosine decay over 8 epochs, paced to end with --minutes if they
//      run out first; --freeze-encoder trains the head alone.
//   5. The result: model.safetensors, config.json and vocab.txt, which --predict reads to
//      classify a sentence and draw its attention.
#include <ember.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/bert_vocabulary.h"
#include "common/options.h"
#include "common/run_main.h"
#include "common/sentiment_task.h"
#include "common/small_bert.h"

using namespace ember;

namespace {

// What a fine-tuning run is asked for (its command line, but for the common options).
struct FineTuning {
  std::string init_from;    // a pretrained BERT folder (config.json, model.safetensors, vocab.txt)
  std::string config_from;  // from scratch: the network this folder's config.json describes
  std::string vocab;        // a vocab.txt; default: the model folder's own, else BERT's
  bool freeze_encoder = false;
  double encoder_lr_factor = 0.5;
  int64_t validation_fold = 0;  // 0: measure on the test split
  int64_t epochs = 8;
  int64_t batch_size = 32;
  // The head's peak learning rate; chosen by 5-fold cross-validation on the training sentences
  // (examples/README.md has the table): 1e-3 fine-tuning, 3e-4 from scratch.
  double lr = 0;
  double weight_decay = 0.01;
  double minutes = 2.0;

  // The folder the network and its word pieces come from, if any.
  const std::string& model_folder() const { return init_from.empty() ? config_from : init_from; }
  double chosen_lr() const { return lr > 0 ? lr : init_from.empty() ? 3e-4 : 1e-3; }
};

// At most 64 pieces, or the model's position count.
int64_t bert_max_tokens(const nn::BertConfig& config) { return std::min<int64_t>(64, config.max_position_embeddings); }

// [CLS] word pieces [SEP], cut before the end with [SEP] kept last.
std::vector<int64_t> bert_pieces(const text::WordPieceTokenizer& tokenizer, const std::string& sentence,
                                 int64_t max_tokens) {
  std::vector<int64_t> pieces = tokenizer.encode_with_specials(sentence);
  if (static_cast<int64_t>(pieces.size()) > max_tokens) {
    pieces.resize(max_tokens);
    pieces.back() = tokenizer.token_to_id("[SEP]");
  }
  return pieces;
}

// The word pieces: the vocab.txt given (--vocab), else the model folder's own (pretrain_bert
// writes one), else BERT's uncased vocabulary.
text::WordPieceTokenizer bert_tokenizer(const examples::CommonOptions& common, const FineTuning& run) {
  if (!run.vocab.empty()) return text::WordPieceTokenizer::from_vocab_txt(run.vocab);
  return examples::bert_vocabulary(common.data_dir, run.model_folder());
}

// The network: pretrained (--init-from, the head fresh), or from random weights, shaped as
// --config-from's or as the small BERT pretrain_bert pretrains.
std::shared_ptr<nn::BertForSequenceClassification> build_model(const FineTuning& run, int64_t vocab_size) {
  if (!run.init_from.empty()) {
    auto pretrained = nn::BertForSequenceClassification::from_pretrained(run.init_from, /*num_labels=*/2);
    fmt::print("model: BertForSequenceClassification from {} (the head fresh)\n", run.init_from);
    return pretrained;
  }
  nn::BertConfig config =
      run.config_from.empty()
          ? examples::SmallBert{}.config(vocab_size)
          : nn::BertConfig::from_json_file((std::filesystem::path(run.config_from) / "config.json").string());
  config.num_labels = 2;
  auto fresh = std::make_shared<nn::BertForSequenceClassification>(config);
  fmt::print("model: BertForSequenceClassification from scratch{}\n",
             run.config_from.empty() ? std::string() : fmt::format(", shaped as {}", run.config_from));
  return fresh;
}

int fine_tune(const examples::CommonOptions& common, const FineTuning& run) {
  EMBER_CHECK(run.init_from.empty() || run.config_from.empty(), "fine_tune_bert: --init-from {} brings its own "
              "network; --config-from {} is for training that network from scratch", run.init_from, run.config_from);
  EMBER_CHECK(!run.freeze_encoder || !run.init_from.empty(), "fine_tune_bert: --freeze-encoder needs --init-from: "
              "a frozen random encoder has nothing to offer the head");
  const Device device = examples::setup_run(common);

  // 1. Data.
  const examples::SentimentSplits splits = examples::load_sentiment_splits(common.data_dir, run.validation_fold);
  const examples::MeasuredSplit& split = splits.measured;

  // 2. and 3. Word pieces and the model.
  const auto tokenizer = bert_tokenizer(common, run);
  const std::shared_ptr<nn::BertForSequenceClassification> bert = build_model(run, tokenizer.vocab_size());
  EMBER_CHECK(bert->bert->config().vocab_size == tokenizer.vocab_size(), "fine_tune_bert: {} has a vocabulary of "
              "{}, the word pieces ({}) number {}", run.model_folder(), bert->bert->config().vocab_size,
              run.vocab.empty() ? "its vocab.txt, or BERT's" : run.vocab, tokenizer.vocab_size());
  fmt::print("vocabulary: {} word pieces\n", tokenizer.vocab_size());
  const int64_t max_tokens = bert_max_tokens(bert->bert->config());
  const auto encode = [&](const std::vector<datasets::LabelledText>& sentences) {
    std::vector<std::vector<int64_t>> ids;
    for (const auto& sentence : sentences) ids.push_back(bert_pieces(tokenizer, sentence.text, max_tokens));
    return ids;
  };
  const auto train_ids = encode(splits.train), measured_ids = encode(split.sentences);
  std::vector<int64_t> train_labels;
  for (const auto& example : splits.train) train_labels.push_back(example.label);
  fmt::print("example: \"{}\" -> {}\n", splits.train[0].text, fmt::join(tokenizer.ids_to_tokens(train_ids[0]), " "));
  bert->to(device);
  examples::Classifier classifier{bert, [&bert](const Tensor& ids, const Tensor& padding_mask) {
                                    return bert->forward(ids, {.attention_mask = logical_not(padding_mask)});
                                  }};

  // 4. Training. The head (pooler and classifier) at --lr; the encoder at its fraction of it, or frozen.
  std::vector<Tensor> head, encoder;
  for (const auto& [name, p] : bert->named_parameters()) {
    const bool in_head = name.starts_with("classifier.") || name.starts_with("bert.pooler.");
    if (in_head) {
      head.push_back(p);
    } else if (run.freeze_encoder) {
      Tensor(p).requires_grad_(false);
    } else {
      encoder.push_back(p);
    }
  }
  const double lr = run.chosen_lr();
  const double encoder_lr = run.init_from.empty() ? lr : lr * run.encoder_lr_factor;
  std::vector<nn::ParamGroup> groups{{head, {{"lr", lr}}}};
  if (!encoder.empty()) groups.push_back({encoder, {{"lr", encoder_lr}}});
  nn::AdamW optimizer(groups, {.lr = lr, .weight_decay = run.weight_decay});
  datasets::BatchSchedule schedule =
      datasets::BatchSchedule::shuffled(static_cast<int64_t>(train_ids.size()), run.batch_size, common.seed);
  const int64_t steps_per_epoch = schedule.batches_in_epoch(0), total_steps = run.epochs * steps_per_epoch;
  std::vector<std::shared_ptr<const nn::LRSchedule>> rates{
      std::make_shared<nn::WarmupCosine>(lr, steps_per_epoch, total_steps)};
  if (!encoder.empty()) rates.push_back(std::make_shared<nn::WarmupCosine>(encoder_lr, steps_per_epoch, total_steps));
  nn::Scheduler scheduler(optimizer, rates);
  fmt::print("training: {} parameters ({} in the head), head lr {}, encoder {}\n", bert->num_parameters(),
             [&] { int64_t n = 0; for (const Tensor& p : head) n += p.numel(); return n; }(), lr,
             run.freeze_encoder ? std::string("frozen") : fmt::format("lr {}", encoder_lr));

  train::MetricsLog log(common.out_path("metrics.csv"), split.csv_columns());
  train::ProgressBar progress(total_steps, {.label = "fine-tune", .unit = "sentences"});
  const train::Precision precision = common.precision_choice();
  nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});  // --precision fp16
  train::TimeBudget budget({.seconds = 60 * run.minutes});
  budget.pace(scheduler, total_steps);
  double loss_sum = 0;
  int64_t loss_count = 0, step = 0;
  examples::Evaluation last, best;
  bert->train();
  while (!budget.finished()) {
    ++step;
    const std::vector<int64_t> rows = schedule.batch(step - 1);
    const datasets::PaddedBatch batch = datasets::pad_batch(datasets::take(train_ids, rows), 0);
    const Tensor targets = tensor(datasets::take(train_labels, rows), {static_cast<int64_t>(rows.size())}).to(device);
    Tensor loss;
    {
      const AutocastGuard autocast = train::autocast_scope(precision, device.type);
      loss = cross_entropy(classifier.forward(batch.ids.to(device), batch.padding_mask.to(device)), targets);
    }
    optimizer.zero_grad();
    scaler.scale(loss).backward();
    scaler.step(optimizer);
    scaler.update();
    budget.step_done();  // the schedule's next step, or further if the time runs short
    loss_sum += loss.item<double>();
    ++loss_count;
    progress.update(step, {{"loss", loss.item<double>()}}, static_cast<double>(rows.size()));
    if (step % steps_per_epoch == 0 || budget.finished()) {
      last = examples::report_epoch(classifier, split, measured_ids, device, step, steps_per_epoch,
                                    loss_sum / loss_count, optimizer.lr(0), log, progress);
      if (last.accuracy > best.accuracy) best = last;
      loss_sum = 0;
      loss_count = 0;
    }
    if (budget.out_of_time()) {
      progress.print_line(fmt::format("time budget of {} minutes reached at step {}; the learning rate's schedule "
                                      "was paced to end with it", run.minutes, step));
    }
  }
  progress.finish();

  // 5. What --predict reads.
  train::plot_metrics_csv(log.path(), run.init_from.empty() ? "BERT from scratch" : "BERT fine-tuned");
  nn::save(*bert, common.out_path("model.safetensors"));
  bert->bert->config().to_json_file(common.out_path("config.json"));
  tokenizer.save_vocab_txt(common.out_path("vocab.txt"));
  fmt::print("{} accuracy {:.1f}% after {} steps in {:.0f} s (best epoch {:.1f}%)\n", split.name, 100 * last.accuracy,
             step, budget.elapsed_seconds(), 100 * best.accuracy);
  return 0;
}

// --predict: the fine-tuned model's verdict on one sentence, and its attention as a heatmap.
int predict(const examples::CommonOptions& common, const std::string& sentence, int64_t layer, int64_t head) {
  const Device device = examples::setup_run(common);
  const nn::BertConfig config = nn::BertConfig::from_json_file(common.out_path("config.json"));
  nn::BertForSequenceClassification model(config);
  nn::load(model, common.out_path("model.safetensors"));
  model.to(device);
  model.eval();
  const int64_t chosen_layer =
      examples::chosen_layer_index(layer, head, config.num_hidden_layers, config.num_attention_heads);

  const auto tokenizer = examples::bert_vocabulary(common.data_dir, common.out_dir);  // the vocab.txt saved with it
  const std::vector<int64_t> ids = bert_pieces(tokenizer, sentence, bert_max_tokens(config));
  EMBER_CHECK(ids.size() > 2, "--predict: the sentence has no words to classify (got \"{}\")", sentence);
  NoGradGuard no_grad;
  const Tensor input = tensor(ids, {1, static_cast<int64_t>(ids.size())}).to(device);
  const Tensor probabilities = softmax(model.forward(input), -1).cpu();
  const int64_t label = argmax(probabilities, -1).item<int64_t>();
  const std::vector<std::string> tokens = tokenizer.ids_to_tokens(ids);
  fmt::print("word pieces: {}\n", fmt::join(tokens, " "));
  fmt::print("{} (probability {:.3f})\n", examples::kSentimentLabels[label], probabilities.at<float>(0, label));
  examples::draw_attention(common, sentence, model.bert->attention_weights(input)[chosen_layer], tokens, chosen_layer,
                           head);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Fine-tune a pretrained BERT on the sentiment sentences (or train one from scratch), or classify "
               "one with --predict"};
  examples::CommonOptions common{.out_dir = "out/fine_tune_bert"};
  examples::add_common_options(app, common);
  FineTuning run;
  std::string sentence;
  int64_t layer = -1, head = 0;
  app.add_option("--init-from", run.init_from, "start from this pretrained BERT folder (config.json + "
                 "model.safetensors, e.g. out/pretrain_bert); the classification head starts fresh");
  app.add_option("--config-from", run.config_from, "from scratch: the network this folder's config.json "
                 "describes, reading its vocab.txt, with fresh random weights (e.g. out/pretrain_bert: the fair "
                 "comparison with --init-from it)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--vocab", run.vocab, "the word pieces, a vocab.txt (default: the --init-from folder's own, else "
                 "BERT's); from scratch, give the pretrained folder's to compare the same network")
      ->check(CLI::ExistingFile);
  app.add_flag("--freeze-encoder", run.freeze_encoder, "train only the head (pooler and classifier) on the frozen "
               "pretrained encoder, the linear-probe comparison");
  app.add_option("--encoder-lr-factor", run.encoder_lr_factor, "--init-from: the pretrained encoder's learning "
                 "rate, as a fraction of --lr (the head's)")
      ->check(examples::between(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--validation-fold", run.validation_fold, "hold out the K-th fifth (1 to 5) of the training "
                 "sentences, train on the rest and measure on it instead of the test split: for choosing settings")
      ->check(examples::between(1, 5));
  app.add_option("--epochs", run.epochs, "passes over the training sentences")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--batch", run.batch_size, "sentences per step")->check(examples::above(0))->capture_default_str();
  app.add_option("--lr", run.lr, "the head's peak learning rate (AdamW; default 1e-3 fine-tuning, 3e-4 from scratch)")
      ->check(examples::above(0));
  app.add_option("--weight-decay", run.weight_decay, "AdamW's decoupled weight decay")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--minutes", run.minutes, "the time budget: the learning rate's schedule is paced to end with it "
                 "if the epochs do not fit")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--predict", sentence, "classify this sentence with the saved model instead of training");
  app.add_option("--layer", layer, "--predict: the layer whose attention is drawn (-1: the last)")->capture_default_str();
  app.add_option("--head", head, "--predict: the attention head drawn")->check(examples::at_least(0))->capture_default_str();

  return examples::run_main(app, argc, argv, common, [&]() -> int {
    if (app.count("--predict") > 0) return predict(common, sentence, layer, head);
    return fine_tune(common, run);
  });
}
