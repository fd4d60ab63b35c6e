// Text classifier: a small transformer encoder trained from scratch to tell positive from
// negative sentences (the UCI "Sentiment Labelled Sentences": IMDb, Amazon and Yelp reviews).
//
//   bash scripts/fetch_data.sh sentiment
//   ./build/examples/text_classifier                          # trains, about a minute on 2 cores
//   ./build/examples/text_classifier --predict "What a great little phone!"
//   ./build/examples/text_classifier --model bow              # the bag-of-words baseline, seconds
//   ./build/examples/text_classifier --model lexicon          # counting opinion words, no training
//   OMP_NUM_THREADS=1 mpirun -np 2 ./build/examples/text_classifier   # data parallel, 2 processes
//
// The recipe, stage by stage:
//   1. Data: 3,000 labelled sentences; every fifth one is held out for the test (600).
//      --validation-fold K (1 to 5) holds out the K-th fifth of the 2,400 training sentences
//      instead and measures on them: settings are chosen on these folds, never on the test.
//   2. Tokens: a word-level vocabulary built from the training sentences only, lower-cased;
//      words never seen in training become [UNK], as they would for a real user's sentence.
//   3. Model: token + learned position embeddings, a 2-layer pre-LN encoder, the mean of the
//      word states (padding left out) and a linear layer to the two classes.
//   4. Training: AdamW with a short warm-up and a cosine decay, batches of 32 sentences padded
//      to their longest one, test accuracy after every epoch.
//      Under mpirun each rank trains on its half of every batch (the same batches one process
//      sees), DistributedDataParallel averages the gradients, and rank 0 prints and writes.
//   5. Inference: --predict loads the saved model and vocabulary, prints the label and its
//      probability, and draws which words attend to which (an SVG heatmap named after the
//      sentence, so that each prediction keeps its own).
//
// A pretrained BERT fine-tuned on the same sentences is the next lesson: examples/fine_tune_bert.
#include <ember.h>

#include <chrono>
#include <fstream>
#include <numeric>
#include <optional>
#include <span>
#include <nlohmann/json.hpp>

#include "common/config_values.h"
#include "common/file_names.h"
#include "common/options.h"
#include "common/run_main.h"
#include "common/sentiment_task.h"

using namespace ember;

namespace {

using examples::Classifier;
using examples::Evaluation;
using examples::MeasuredSplit;

// The recipe's sizes, saved beside the model so --predict rebuilds the same network.
struct Recipe {
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t d_ff = 256;
  double dropout = 0.1;
  int64_t max_tokens = 64;  // longer sentences are cut; positions beyond are never learned
  int64_t vocab_size = 0;   // set from the tokenizer

  nn::TransformerClassifierOptions model_options() const {
    nn::TransformerClassifierOptions options;
    options.vocab_size = vocab_size;
    options.max_len = max_tokens;
    options.num_classes = 2;
    options.num_layers = layers;
    options.layer = {.d_model = d_model, .num_heads = heads, .d_ff = d_ff, .dropout = dropout,
                     .activation = nn::Activation::GELU, .norm_first = true};
    options.pooling = nn::Pooling::Mean;
    options.final_norm = true;  // a pre-LN stack's last output is not normalised otherwise
    options.padding_idx = 0;
    return options;
  }
};

void save_recipe(const Recipe& recipe, const std::string& path) {
  const nlohmann::json json = {{"d_model", recipe.d_model}, {"heads", recipe.heads},
                               {"layers", recipe.layers},   {"d_ff", recipe.d_ff},
                               {"dropout", recipe.dropout}, {"max_tokens", recipe.max_tokens},
                               {"vocab_size", recipe.vocab_size}};
  nn::write_file_atomically(path, json.dump(2) + "\n");
}

Recipe load_recipe(const std::string& path) {
  std::ifstream file(path);
  EMBER_CHECK(file.good(), "text_classifier: {} not found; train a model first (run without --predict)", path);
  try {
    const nlohmann::json json = nlohmann::json::parse(file);
    Recipe recipe;
    recipe.d_model = examples::config_integer(json, "d_model", path);
    recipe.heads = examples::config_integer(json, "heads", path);
    recipe.layers = examples::config_integer(json, "layers", path);
    recipe.d_ff = examples::config_integer(json, "d_ff", path);
    recipe.dropout = json.at("dropout").get<double>();
    recipe.max_tokens = examples::config_integer(json, "max_tokens", path);
    recipe.vocab_size = examples::config_integer(json, "vocab_size", path);
    return recipe;
  } catch (const nlohmann::json::exception& error) {
    fail("text_classifier: {} is not a model configuration: {}", path, error.what());
  }
}

// Token ids of each sentence, cut to the model's positions.
std::vector<std::vector<int64_t>> encode_all(const text::Tokenizer& tokenizer,
                                             const std::vector<datasets::LabelledText>& sentences,
                                             int64_t max_tokens) {
  std::vector<std::vector<int64_t>> ids;
  ids.reserve(sentences.size());
  for (const auto& sentence : sentences) {
    std::vector<int64_t> sentence_ids = tokenizer.encode(sentence.text);
    if (sentence_ids.empty()) sentence_ids.push_back(*tokenizer.unk_id());  // e.g. only emoji
    if (static_cast<int64_t>(sentence_ids.size()) > max_tokens) sentence_ids.resize(max_tokens);
    ids.push_back(std::move(sentence_ids));
  }
  return ids;
}

// --model bow, the lesson's baseline: logistic regression on bag-of-words counts. Each sentence
// becomes a vector of vocabulary size counting its words (order thrown away), and one Linear
// layer with cross-entropy learns a weight per word and class: ember's own Linear and loss, the
// same optimizer and batches as the transformer. With 2,400 sentences it is hard to beat,
// because a word's sentiment is most of what a review sentence tells.
Tensor word_counts(const std::vector<std::vector<int64_t>>& ids, int64_t vocab_size) {
  Tensor counts = zeros({static_cast<int64_t>(ids.size()), vocab_size});
  float* data = counts.data_ptr<float>();
  for (size_t row = 0; row < ids.size(); ++row) {
    for (const int64_t id : ids[row]) {
      if (id != 0) data[row * vocab_size + id] += 1.0f;  // [PAD] never occurs; counted out anyway
    }
  }
  return counts;
}

int train_bag_of_words(const examples::CommonOptions& common, Device device,
                       const std::vector<std::vector<int64_t>>& train_ids, const std::vector<int64_t>& train_labels,
                       const MeasuredSplit& split, const std::vector<std::vector<int64_t>>& test_ids,
                       int64_t vocab_size, int64_t epochs, int64_t batch_size, double lr, double weight_decay) {
  const std::vector<int64_t> test_labels = split.labels();
  const Tensor train_counts = word_counts(train_ids, vocab_size).to(device);
  const Tensor test_counts = word_counts(test_ids, vocab_size).to(device);
  const Tensor train_targets = tensor(train_labels, {static_cast<int64_t>(train_labels.size())}).to(device);
  const Tensor test_targets = tensor(test_labels, {static_cast<int64_t>(test_labels.size())}).to(device);
  nn::Linear model(vocab_size, 2);
  model.to(device);
  fmt::print("model: bag of words, logistic regression over {} words ({} parameters)\n", vocab_size,
             model.num_parameters());
  nn::AdamW optimizer(model.parameters(), {.lr = lr, .weight_decay = weight_decay});
  datasets::BatchSchedule schedule =
      datasets::BatchSchedule::shuffled(static_cast<int64_t>(train_ids.size()), batch_size, common.seed);
  std::vector<std::string> columns = split.csv_columns();
  columns.pop_back();  // one learning rate throughout
  train::MetricsLog log(common.out_path("metrics.csv"), columns);
  const auto started = std::chrono::steady_clock::now();
  double accuracy = 0;
  for (int64_t epoch = 0, step = 0; epoch < epochs; ++epoch) {
    double loss_sum = 0;
    const int64_t batches = schedule.batches_in_epoch(epoch);
    for (int64_t b = 0; b < batches; ++b, ++step) {
      const std::vector<int64_t> rows = schedule.batch(step);
      const Tensor index = tensor(rows, {static_cast<int64_t>(rows.size())}).to(device);
      const Tensor loss = cross_entropy(model.forward(index_select(train_counts, 0, index)),
                                        index_select(train_targets, 0, index));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
    }
    NoGradGuard no_grad;
    const Tensor logits = model.forward(test_counts);
    const double test_loss = cross_entropy(logits, test_targets).item<double>();
    accuracy = eq(argmax(logits, -1), test_targets).to(kFloat64).mean().item<double>();
    log.write(step, {{"train_loss", loss_sum / batches}, {split.name + "_loss", test_loss},
                     {split.name + "_accuracy", accuracy}});
    fmt::print("epoch {:>2}  train loss {:.3f}  {} loss {:.3f}  {} accuracy {:.1f}%\n", epoch + 1,
               loss_sum / batches, split.name, test_loss, split.name, 100 * accuracy);
  }
  train::plot_metrics_csv(log.path(), "bag-of-words baseline");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print("{} accuracy {:.1f}% (bag of words) after {} epochs in {:.1f} s\n", split.name, 100 * accuracy, epochs,
             seconds);
  return 0;
}

// --model lexicon, what a word list alone knows: a sentence with more positive than negative words
// of the AFINN-165 lexicon (the one pretrain_bert --polarity words learns from) is called
// positive, any other negative. Nothing is trained and no label of the training split is read;
// beside the other models it shows how much of the task the lexicon already holds.
int classify_by_lexicon(const examples::CommonOptions& common, const MeasuredSplit& split) {
  const text::WordPieceTokenizer words({"[UNK]"});  // for basic_tokenize alone: lower case, punctuation apart
  const datasets::PolarityLexicon lexicon = datasets::load_afinn(common.data_dir, words);
  fmt::print("model: AFINN-165, {} words with a polarity; positive when the positive words outnumber the negative\n",
             lexicon.polarity.size());
  int64_t correct = 0, without_opinion = 0, tied = 0;
  for (const auto& sentence : split.sentences) {
    int64_t positive = 0, negative = 0;
    for (const std::string& word : words.basic_tokenize(sentence.text)) {
      const auto found = lexicon.polarity.find(word);
      if (found != lexicon.polarity.end()) (found->second == 1 ? positive : negative) += 1;
    }
    without_opinion += positive + negative == 0;
    tied += positive == negative && positive > 0;
    correct += (positive > negative ? 1 : 0) == sentence.label;
  }
  const int64_t count = static_cast<int64_t>(split.sentences.size());
  fmt::print("{} sentences have no lexicon word and {} as many positive as negative ones: both are called negative\n",
             without_opinion, tied);
  fmt::print("{} accuracy {:.1f}% (lexicon, {} sentences)\n", split.name, 100.0 * correct / std::max<int64_t>(count, 1),
             count);
  return 0;
}

// --predict: the saved model's verdict on one sentence, and its attention as a heatmap.
int predict(const examples::CommonOptions& common, const std::string& sentence, int64_t layer, int64_t head) {
  const Device device = examples::setup_run(common);
  const Recipe recipe = load_recipe(common.out_path("config.json"));
  const text::WordTokenizer tokenizer = text::WordTokenizer::load(common.out_path("tokenizer.json"));
  EMBER_CHECK(tokenizer.vocab_size() == recipe.vocab_size,
              "text_classifier: tokenizer.json has {} tokens but config.json says {}: they come from different runs",
              tokenizer.vocab_size(), recipe.vocab_size);
  nn::TransformerClassifier model(recipe.model_options());
  nn::load(model, common.out_path("model.safetensors"));
  model.to(device);
  model.eval();

  const std::vector<int64_t> ids = tokenizer.encode(sentence);
  EMBER_CHECK(!ids.empty(), "--predict: the sentence has no words to classify (got \"{}\")", sentence);
  EMBER_CHECK(static_cast<int64_t>(ids.size()) <= recipe.max_tokens,
              "--predict: the sentence has {} tokens; this model reads at most {}", ids.size(), recipe.max_tokens);
  const int64_t chosen_layer = examples::chosen_layer_index(layer, head, recipe.layers, recipe.heads);

  NoGradGuard no_grad;
  const Tensor input = tensor(ids, {1, static_cast<int64_t>(ids.size())}).to(device);
  const Tensor probabilities = softmax(model.forward(input), -1).cpu();
  const int64_t label = argmax(probabilities, -1).item<int64_t>();
  const std::vector<std::string> tokens = tokenizer.ids_to_tokens(ids);
  fmt::print("tokens: {}\n", fmt::join(tokens, " "));
  // Words never seen in training all read as [UNK]: the model knows nothing of them.
  std::vector<std::string> unknown;
  const std::vector<std::string> words = tokenizer.tokenize(sentence);
  for (size_t i = 0; i < ids.size() && i < words.size(); ++i) {
    if (ids[i] == tokenizer.unk_id()) unknown.push_back(words[i]);
  }
  EMBER_CHECK(unknown.size() < ids.size(),
              "--predict: none of the words of \"{}\" is in the model's vocabulary of {} words", sentence,
              tokenizer.vocab_size());
  if (!unknown.empty()) fmt::print("not in the vocabulary (read as [UNK]): {}\n", fmt::join(unknown, ", "));
  fmt::print("{} (probability {:.3f})\n", examples::kSentimentLabels[label], probabilities.at<float>(0, label));
  examples::draw_attention(common, sentence, model.attention_weights(input)[chosen_layer], tokens, chosen_layer, head);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a transformer classifier on the sentiment sentences, or classify one with --predict"};
  examples::CommonOptions common{.out_dir = "out/text_classifier"};
  examples::add_common_options(app, common);
  Recipe recipe;
  int64_t epochs = 15, batch_size = 32;
  double lr = 1e-3, weight_decay = 0.01, minutes = 2.0;
  std::string sentence, model_kind = "transformer";
  int64_t layer = -1, head = 0;
  int64_t validation_fold = 0;
  app.add_option("--model", model_kind, "transformer (the demo's); bow: the bag-of-words baseline (logistic "
                 "regression on word counts; defaults --epochs 20 --lr 0.01 --weight-decay 0.1); lexicon: count "
                 "AFINN-165's positive and negative words, nothing trained (BERT, pretrained and fine-tuned, is "
                 "examples/fine_tune_bert)")
      ->check(CLI::IsMember({"transformer", "bow", "lexicon"}))
      ->capture_default_str();
  app.add_option("--validation-fold", validation_fold, "hold out the K-th fifth (1 to 5) of the training sentences, "
                 "train on the rest and measure on it instead of the test split: for choosing settings")
      ->check(examples::between(1, 5));
  app.add_option("--epochs", epochs, "passes over the training sentences")->check(examples::above(0))->capture_default_str();
  app.add_option("--batch", batch_size, "sentences per step")->check(examples::above(0))->capture_default_str();
  app.add_option("--lr", lr, "peak learning rate (AdamW)")->check(examples::above(0))->capture_default_str();
  app.add_option("--weight-decay", weight_decay, "AdamW's decoupled weight decay")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--d-model", recipe.d_model, "width of the model")->check(examples::above(0))->capture_default_str();
  app.add_option("--layers", recipe.layers, "encoder layers")->check(examples::above(0))->capture_default_str();
  app.add_option("--heads", recipe.heads, "attention heads")->check(examples::above(0))->capture_default_str();
  app.add_option("--dropout", recipe.dropout, "dropout probability")->check(examples::between(0.0, 0.9))->capture_default_str();
  app.add_option("--minutes", minutes, "the time budget: the learning rate's schedule is paced to end with it if the "
                 "epochs do not fit")->check(examples::above(0))->capture_default_str();
  app.add_option("--predict", sentence, "classify this sentence with the saved model instead of training");
  app.add_option("--layer", layer, "--predict: the layer whose attention is drawn (-1: the last)")->capture_default_str();
  app.add_option("--head", head, "--predict: the attention head drawn")->check(examples::at_least(0))->capture_default_str();

  return examples::run_main(app, argc, argv, common, [&]() -> int {
    if (app.count("--predict") > 0) return predict(common, sentence, layer, head);
    const Device device = examples::setup_run(common);

    // 1. Data.
    const examples::SentimentSplits splits = examples::load_sentiment_splits(common.data_dir, validation_fold);
    const std::vector<datasets::LabelledText>& train_sentences = splits.train;
    const MeasuredSplit& measured = splits.measured;
    std::vector<std::string> train_texts;
    std::vector<int64_t> train_labels;
    for (const auto& example : train_sentences) {
      train_texts.push_back(example.text);
      train_labels.push_back(example.label);
    }
    if (model_kind == "lexicon") return classify_by_lexicon(common, measured);

    // 2. Tokens: the vocabulary comes from the training split alone.
    text::WordTokenizerOptions tokenizer_options;
    tokenizer_options.lowercase = true;
    const text::WordTokenizer tokenizer = text::WordTokenizer::train(train_texts, tokenizer_options);
    recipe.vocab_size = tokenizer.vocab_size();
    const auto train_ids = encode_all(tokenizer, train_sentences, recipe.max_tokens);
    const auto test_ids = encode_all(tokenizer, measured.sentences, recipe.max_tokens);
    EMBER_CHECK(tokenizer.pad_id() == 0, "text_classifier: the model expects [PAD] at id 0");
    fmt::print("vocabulary: {} words (lower-cased; unseen words become [UNK])\n", tokenizer.vocab_size());
    fmt::print("example: \"{}\" -> {}\n", train_sentences[0].text, fmt::join(train_ids[0], " "));
    if (model_kind == "bow") {
      // The baseline's own defaults where the command line names none: one layer learns faster.
      return train_bag_of_words(common, device, train_ids, train_labels, measured, test_ids, recipe.vocab_size,
                                app.count("--epochs") ? epochs : 20, batch_size, app.count("--lr") ? lr : 1e-2,
                                app.count("--weight-decay") ? weight_decay : 0.1);
    }

    // 3. Model.
    auto classifier_model = std::make_shared<nn::TransformerClassifier>(recipe.model_options());
    nn::TransformerClassifier& model = *classifier_model;
    Classifier classifier{classifier_model, [&model](const Tensor& ids, const Tensor& padding_mask) {
                            return model.forward(ids, padding_mask);
                          }};
    model.to(device);
    fmt::print("model: {} layers, d_model {}, {} heads, {} parameters\n", recipe.layers, recipe.d_model, recipe.heads,
               model.num_parameters());

    // 4. Training.
    // Each rank takes its share of every batch (all of it in a single process).
    datasets::DistributedSampler schedule(
        datasets::BatchSchedule::shuffled(static_cast<int64_t>(train_ids.size()), batch_size, common.seed),
        distributed::rank(), distributed::world_size());
    const int64_t steps_per_epoch = schedule.batches_in_epoch(0);
    const int64_t total_steps = epochs * steps_per_epoch;
    nn::AdamW optimizer(nn::weight_decay_groups(model, weight_decay), {.lr = lr});
    nn::Scheduler scheduler(optimizer, std::make_shared<nn::WarmupCosine>(lr, steps_per_epoch, total_steps));

    // --precision fp16 scales the loss; the scale is saved with the checkpoints.
    const train::Precision precision = common.precision_choice();
    nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});

    train::CheckpointSaver saver(common.out_path("checkpoint.safetensors"), steps_per_epoch, model, optimizer,
                                 &scheduler, &scaler);
    std::optional<int64_t> resumed;
    if (common.resume) {
      std::string found;
      resumed = train::resume_from(saver.path(), model, optimizer, &scheduler, &found, &scaler);
      fmt::print("--resume: {}\n", found);
    }
    train::MetricsLog log(common.out_path("metrics.csv"), measured.csv_columns(), resumed);
    train::ProgressBar progress(total_steps, {.label = "train", .unit = "sentences"}, resumed.value_or(0));

    // One step: forward, loss, backward, AdamW. On a GPU, the step of each batch shape is captured
    // once as a CUDA graph and replayed after (nn/train/graphed_steps.h); the batches are then
    // padded to a multiple of 8 tokens, so there are a few shapes (at most max_tokens: the
    // multiple divides it). The learning-rate schedule runs outside the step: a replay reads it.
    // Under mpirun the gradients are averaged over the ranks during backward, and a step is
    // not captured as a graph (the averaging waits on the host). With --precision bf16 or fp16
    // the forward pass and the loss run under autocast; fp16 also scales the loss.
    std::optional<nn::DistributedDataParallel> data_parallel;
    if (distributed::world_size() > 1) data_parallel.emplace(model);
    const bool graphs = !data_parallel && examples::cuda_graphs_apply(common, device);
    const int64_t length_multiple = graphs ? std::gcd<int64_t>(8, recipe.max_tokens) : 1;
    train::GraphedSteps train_step(
        [&](std::span<const Tensor> batch) {  // ids, padding mask, labels
          Tensor loss;
          {
            const AutocastGuard autocast = train::autocast_scope(precision, device.type);
            loss = cross_entropy(model.forward(batch[0], batch[1]), batch[2]);
          }
          optimizer.zero_grad();
          scaler.scale(loss).backward();
          scaler.step(optimizer);
          scaler.update();
          return loss;
        },
        {.enabled = graphs});

    // The schedule runs over the epochs; if they do not fit in --minutes, it is paced to end with
    // the time instead. Under mpirun every rank reads rank 0's clock, so all stop at one step.
    train::TimeBudget budget({.seconds = 60 * minutes});
    budget.pace(scheduler, total_steps);
    double loss_sum = 0;
    int64_t loss_count = 0, step = resumed.value_or(0);
    Evaluation last;
    model.train();
    while (!budget.finished()) {
      ++step;
      const std::vector<int64_t> rows = schedule.batch(step - 1);
      const datasets::PaddedBatch batch = datasets::pad_batch(datasets::take(train_ids, rows), 0, -1, length_multiple);
      const Tensor targets = tensor(datasets::take(train_labels, rows), {static_cast<int64_t>(rows.size())}).to(device);

      const Tensor loss = train_step({batch.ids.to(device), batch.padding_mask.to(device), targets});
      budget.step_done();  // the schedule's next step, or further if the time runs short

      const double loss_value = loss.item<double>();
      loss_sum += loss_value;
      ++loss_count;
      progress.update(step, {{"loss", loss_value}}, static_cast<double>(rows.size() * distributed::world_size()));

      if (step % steps_per_epoch == 0 || budget.finished()) {
        last = examples::report_epoch(classifier, measured, test_ids, device, step, steps_per_epoch,
                                      loss_sum / loss_count, optimizer.lr(0), log, progress);
        loss_sum = 0;
        loss_count = 0;
        saver.save(step);
      }
      if (budget.out_of_time()) {
        progress.print_line(fmt::format("time budget of {} minutes reached at step {}; the learning rate's schedule "
                                        "was paced to end with it", minutes, step));
      }
    }
    progress.finish();

    // 5. Save what --predict needs: the weights, the vocabulary and the recipe.
    train::plot_metrics_csv(log.path(), "text classifier");
    if (!examples::is_main_process()) return 0;  // rank 0 writes the files
    nn::save(model, common.out_path("model.safetensors"));
    tokenizer.save(common.out_path("tokenizer.json"));
    save_recipe(recipe, common.out_path("config.json"));
    fmt::print("{} accuracy {:.1f}% after {} steps in {:.0f} s\n", measured.name, 100 * last.accuracy, step,
               budget.elapsed_seconds());
    return 0;
  });
}
