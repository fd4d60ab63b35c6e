// Text classifier: a small transformer encoder trained from scratch to tell positive from
// negative sentences (the UCI "Sentiment Labelled Sentences": IMDb, Amazon and Yelp reviews).
//
//   bash scripts/fetch_data.sh sentiment
//   ./build/examples/text_classifier                          # trains, about a minute on 2 cores
//   ./build/examples/text_classifier --predict "What a great little phone!"
//   ./build/examples/text_classifier --model bow              # the bag-of-words baseline, seconds
//   ./build/examples/text_classifier --model lexicon          # counting opinion words, no training
//   ./build/examples/text_classifier --model bert --init-from out/pretrain_bert   # fine-tuning
//   ./build/examples/text_classifier --model bert --predict "What a great little phone!"
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
#include <ember.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <numeric>
#include <optional>
#include <span>
#include <nlohmann/json.hpp>

#include "common/bert_vocabulary.h"
#include "common/config_values.h"
#include "common/file_names.h"
#include "common/options.h"
#include "common/run_main.h"

using namespace ember;

namespace {

const char* const kLabels[] = {"negative", "positive"};

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
Evaluation evaluate(Classifier& classifier, const std::vector<std::vector<int64_t>>& ids,
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

// The end of an epoch (or of training): the measured split's loss and accuracy, a row of the
// metrics CSV and a line above the progress bar.
Evaluation report_epoch(Classifier& classifier, const MeasuredSplit& split,
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

// --model bert reads a sentence as BERT does: [CLS] word pieces [SEP], at most 64 pieces (or
// the model's position count), cut before the end with [SEP] kept last.
int64_t bert_max_tokens(const nn::BertConfig& config) { return std::min<int64_t>(64, config.max_position_embeddings); }

std::vector<int64_t> bert_pieces(const text::WordPieceTokenizer& tokenizer, const std::string& sentence,
                                 int64_t max_tokens) {
  std::vector<int64_t> pieces = tokenizer.encode_with_specials(sentence);
  if (static_cast<int64_t>(pieces.size()) > max_tokens) {
    pieces.resize(max_tokens);
    pieces.back() = tokenizer.token_to_id("[SEP]");
  }
  return pieces;
}

// --model bert's learning rate where --lr names none, each chosen by 5-fold cross-validation on
// the training sentences (--validation-fold; examples/README.md has the table): fine-tuning's
// head learns at 1e-3 (its encoder at --encoder-lr-factor of that); from scratch the whole
// network learns best at 3e-4.
double bert_lr(const std::string& init_from) { return init_from.empty() ? 3e-4 : 1e-3; }

// --model bert's word pieces: the vocab.txt given (--vocab), else the --init-from folder's own
// (pretrain_bert writes one), else BERT's uncased vocabulary.
text::WordPieceTokenizer bert_tokenizer(const examples::CommonOptions& common, const std::string& init_from,
                                        const std::string& vocab) {
  if (!vocab.empty()) return text::WordPieceTokenizer::from_vocab_txt(vocab);
  return examples::bert_vocabulary(common.data_dir, init_from);
}

// --model bert: the lesson's third step. BertForSequenceClassification reads the sentences as
// word pieces ([CLS] ... [SEP]) and classifies the pooled [CLS] state. With --init-from, its
// encoder starts from a pretrained one (examples/pretrain_bert), reads text with that folder's
// vocab.txt, and learns at half the head's rate (--encoder-lr-factor), after a warm-up: large
// early updates would wash out what pretraining put there. The half was chosen on the
// validation folds (examples/README.md has the lesson's table for 0.1, 0.3, 0.5 and 1).
// --freeze-encoder trains the head alone (the linear probe). Without --init-from the same
// network starts from random weights, the fair from-scratch comparison (--config-from gives it
// the pretrained model's shape and word pieces), at the learning rate its own folds chose.
int fine_tune_bert(const examples::CommonOptions& common, Device device,
                   const std::vector<datasets::LabelledText>& train_sentences, const MeasuredSplit& split,
                   const std::string& init_from, const std::string& config_from, const std::string& vocab,
                   bool freeze_encoder, double encoder_lr_factor, int64_t epochs, int64_t batch_size, double lr,
                   double weight_decay, double minutes) {
  const auto tokenizer = bert_tokenizer(common, init_from.empty() ? config_from : init_from, vocab);
  std::shared_ptr<nn::BertForSequenceClassification> bert;
  if (!init_from.empty()) {
    bert = nn::BertForSequenceClassification::from_pretrained(init_from, /*num_labels=*/2);
    fmt::print("model: BertForSequenceClassification from {} (the head fresh)\n", init_from);
  } else {
    EMBER_CHECK(!freeze_encoder, "text_classifier: --freeze-encoder needs --init-from: a frozen random encoder "
                "has nothing to offer the head");
    nn::BertConfig config;  // pretrain_bert's default network, or the one --config-from describes
    if (!config_from.empty()) {
      config = nn::BertConfig::from_json_file((std::filesystem::path(config_from) / "config.json").string());
    } else {
      config.vocab_size = tokenizer.vocab_size();
      config.hidden_size = 128;
      config.num_hidden_layers = 2;
      config.num_attention_heads = 4;
      config.intermediate_size = 512;
      config.max_position_embeddings = 128;
    }
    config.num_labels = 2;
    bert = std::make_shared<nn::BertForSequenceClassification>(config);
    fmt::print("model: BertForSequenceClassification from scratch{}\n",
               config_from.empty() ? std::string() : fmt::format(", shaped as {}", config_from));
  }
  EMBER_CHECK(bert->bert->config().vocab_size == tokenizer.vocab_size(), "text_classifier: {} has a vocabulary of "
              "{}, the word pieces ({}) number {}", init_from.empty() ? config_from : init_from,
              bert->bert->config().vocab_size,
              vocab.empty() ? "its vocab.txt, or BERT's" : vocab, tokenizer.vocab_size());
  fmt::print("vocabulary: {} word pieces\n", tokenizer.vocab_size());
  const int64_t max_tokens = bert_max_tokens(bert->bert->config());
  const auto encode = [&](const std::vector<datasets::LabelledText>& sentences) {
    std::vector<std::vector<int64_t>> ids;
    for (const auto& sentence : sentences) ids.push_back(bert_pieces(tokenizer, sentence.text, max_tokens));
    return ids;
  };
  const auto train_ids = encode(train_sentences), measured_ids = encode(split.sentences);
  std::vector<int64_t> train_labels;
  for (const auto& example : train_sentences) train_labels.push_back(example.label);
  fmt::print("example: \"{}\" -> {}\n", train_sentences[0].text, fmt::join(tokenizer.ids_to_tokens(train_ids[0]), " "));
  bert->to(device);
  Classifier classifier{bert, [&bert](const Tensor& ids, const Tensor& padding_mask) {
                          return bert->forward(ids, {.attention_mask = logical_not(padding_mask)});
                        }};

  // The head (pooler and classifier) at --lr; the encoder at its fraction of it, or frozen.
  std::vector<Tensor> head, encoder;
  for (const auto& [name, p] : bert->named_parameters()) {
    const bool in_head = name.starts_with("classifier.") || name.starts_with("bert.pooler.");
    if (in_head) {
      head.push_back(p);
    } else if (freeze_encoder) {
      Tensor(p).requires_grad_(false);
    } else {
      encoder.push_back(p);
    }
  }
  const double encoder_lr = init_from.empty() ? lr : lr * encoder_lr_factor;
  std::vector<nn::ParamGroup> groups{{head, {{"lr", lr}}}};
  if (!encoder.empty()) groups.push_back({encoder, {{"lr", encoder_lr}}});
  nn::AdamW optimizer(groups, {.lr = lr, .weight_decay = weight_decay});
  datasets::BatchSchedule schedule =
      datasets::BatchSchedule::shuffled(static_cast<int64_t>(train_ids.size()), batch_size, common.seed);
  const int64_t steps_per_epoch = schedule.batches_in_epoch(0), total_steps = epochs * steps_per_epoch;
  std::vector<std::shared_ptr<const nn::LRSchedule>> rates{
      std::make_shared<nn::WarmupCosine>(lr, steps_per_epoch, total_steps)};
  if (!encoder.empty()) rates.push_back(std::make_shared<nn::WarmupCosine>(encoder_lr, steps_per_epoch, total_steps));
  nn::Scheduler scheduler(optimizer, rates);
  fmt::print("training: {} parameters ({} in the head), head lr {}, encoder {}\n", bert->num_parameters(),
             [&] { int64_t n = 0; for (const Tensor& p : head) n += p.numel(); return n; }(), lr,
             freeze_encoder ? std::string("frozen") : fmt::format("lr {}", encoder_lr));

  train::MetricsLog log(common.out_path("metrics.csv"), split.csv_columns());
  train::ProgressBar progress(total_steps, {.label = "fine-tune", .unit = "sentences"});
  const train::Precision precision = common.precision_choice();
  nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});  // --precision fp16
  const auto started = std::chrono::steady_clock::now();
  double loss_sum = 0;
  int64_t loss_count = 0, step = 0;
  Evaluation last, best;
  bert->train();
  for (step = 1; step <= total_steps; ++step) {
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
    scheduler.step();
    loss_sum += loss.item<double>();
    ++loss_count;
    progress.update(step, {{"loss", loss.item<double>()}}, static_cast<double>(rows.size()));
    const bool out_of_time =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > 60 * minutes;
    if (step % steps_per_epoch == 0 || step == total_steps || out_of_time) {
      last = report_epoch(classifier, split, measured_ids, device, step, steps_per_epoch, loss_sum / loss_count,
                          optimizer.lr(0), log, progress);
      if (last.accuracy > best.accuracy) best = last;
      loss_sum = 0;
      loss_count = 0;
    }
    if (out_of_time) {
      progress.print_line(fmt::format("time budget of {} minutes reached at step {}", minutes, step));
      break;
    }
  }
  progress.finish();
  train::plot_metrics_csv(log.path(), init_from.empty() ? "BERT from scratch" : "BERT fine-tuned");
  nn::save(*bert, common.out_path("model.safetensors"));  // with config.json, what --predict reads
  bert->bert->config().to_json_file(common.out_path("config.json"));
  tokenizer.save_vocab_txt(common.out_path("vocab.txt"));
  fmt::print("{} accuracy {:.1f}% after {} steps in {:.0f} s (best epoch {:.1f}%)\n", split.name, 100 * last.accuracy,
             std::min(step, total_steps), std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
             100 * best.accuracy);
  return 0;
}

// The attention of one head of one layer over the sentence, as an SVG heatmap. One file per
// prediction: "attention-what-a-great-little-phone.svg", then "...-2.svg".
void draw_attention(const examples::CommonOptions& common, const std::string& sentence, const Tensor& layer_weights,
                    const std::vector<std::string>& tokens, int64_t layer, int64_t head) {
  const Tensor weights = layer_weights.select(0, 0).select(0, head);  // [S, S] of [batch, heads, S, S]
  const std::string heatmap =
      examples::unused_path(common.out_dir, "attention-" + examples::slug(sentence), ".svg").string();
  train::write_heatmap_svg(heatmap, weights.cpu(), tokens, tokens,
                           fmt::format("\"{}\": layer {}, head {} (rows: queries, columns: keys)", sentence, layer,
                                       head));
  fmt::print("attention heatmap: {}\n", heatmap);
}

// --layer (negative counts from the last) and --head checked against the model's sizes; the
// layer's index from the first.
int64_t chosen_layer_index(int64_t layer, int64_t head, int64_t layers, int64_t heads) {
  EMBER_CHECK(layer >= -layers && layer < layers, "--layer: {} is not a layer of this {}-layer model", layer, layers);
  EMBER_CHECK(head >= 0 && head < heads, "--head: {} is not a head of this {}-head model", head, heads);
  return layer < 0 ? layer + layers : layer;
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
  const int64_t chosen_layer = chosen_layer_index(layer, head, recipe.layers, recipe.heads);

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
  fmt::print("{} (probability {:.3f})\n", kLabels[label], probabilities.at<float>(0, label));
  draw_attention(common, sentence, model.attention_weights(input)[chosen_layer], tokens, chosen_layer, head);
  return 0;
}

// --model bert --predict: the same for a fine-tuned BERT, rebuilt from its config.json.
int predict_bert(const examples::CommonOptions& common, const std::string& sentence, int64_t layer, int64_t head) {
  const Device device = examples::setup_run(common);
  const nn::BertConfig config = nn::BertConfig::from_json_file(common.out_path("config.json"));
  nn::BertForSequenceClassification model(config);
  nn::load(model, common.out_path("model.safetensors"));
  model.to(device);
  model.eval();
  const int64_t chosen_layer = chosen_layer_index(layer, head, config.num_hidden_layers, config.num_attention_heads);

  const auto tokenizer = examples::bert_vocabulary(common.data_dir, common.out_dir);  // the vocab.txt saved with it
  const std::vector<int64_t> ids = bert_pieces(tokenizer, sentence, bert_max_tokens(config));
  EMBER_CHECK(ids.size() > 2, "--predict: the sentence has no words to classify (got \"{}\")", sentence);
  NoGradGuard no_grad;
  const Tensor input = tensor(ids, {1, static_cast<int64_t>(ids.size())}).to(device);
  const Tensor probabilities = softmax(model.forward(input), -1).cpu();
  const int64_t label = argmax(probabilities, -1).item<int64_t>();
  const std::vector<std::string> tokens = tokenizer.ids_to_tokens(ids);
  fmt::print("word pieces: {}\n", fmt::join(tokens, " "));
  fmt::print("{} (probability {:.3f})\n", kLabels[label], probabilities.at<float>(0, label));
  draw_attention(common, sentence, model.bert->attention_weights(input)[chosen_layer], tokens, chosen_layer, head);
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
  std::string init_from, config_from, vocab;
  bool freeze_encoder = false;
  double encoder_lr_factor = 0.5;
  int64_t validation_fold = 0;
  app.add_option("--model", model_kind, "transformer (the demo's); bow: the bag-of-words baseline (logistic "
                 "regression on word counts; defaults --epochs 20 --lr 0.01 --weight-decay 0.1); lexicon: count "
                 "AFINN-165's positive and negative words, nothing trained; bert: BertForSequenceClassification on "
                 "BERT's word pieces, from --init-from or from scratch")
      ->check(CLI::IsMember({"transformer", "bow", "lexicon", "bert"}))
      ->capture_default_str();
  app.add_option("--init-from", init_from, "--model bert: start from this pretrained BERT folder (config.json + "
                 "model.safetensors, e.g. out/pretrain_bert); the classification head starts fresh");
  app.add_option("--config-from", config_from, "--model bert from scratch: the network this folder's config.json "
                 "describes, reading its vocab.txt, with fresh random weights (e.g. out/pretrain_bert: the fair "
                 "comparison with --init-from it)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--vocab", vocab, "--model bert: the word pieces, a vocab.txt (default: the --init-from folder's "
                 "own, else BERT's); from scratch, give the pretrained folder's to compare the same network")
      ->check(CLI::ExistingFile);
  app.add_flag("--freeze-encoder", freeze_encoder, "--model bert: train only the head (pooler and classifier) on "
               "the frozen pretrained encoder, the linear-probe comparison");
  app.add_option("--encoder-lr-factor", encoder_lr_factor, "--model bert --init-from: the pretrained encoder's "
                 "learning rate, as a fraction of --lr (the head's)")
      ->check(examples::between(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--validation-fold", validation_fold, "hold out the K-th fifth (1 to 5) of the training sentences, "
                 "train on the rest and measure on it instead of the test split: for choosing settings")
      ->check(examples::between(1, 5));
  app.add_option("--epochs", epochs, "passes over the training sentences")->check(examples::above(0))->capture_default_str();
  app.add_option("--batch", batch_size, "sentences per step")->check(examples::above(0))->capture_default_str();
  app.add_option("--lr", lr, "peak learning rate (AdamW; --model bert: 1e-3 fine-tuning, 3e-4 from scratch)")->check(examples::above(0))->capture_default_str();
  app.add_option("--weight-decay", weight_decay, "AdamW's decoupled weight decay")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--d-model", recipe.d_model, "width of the model")->check(examples::above(0))->capture_default_str();
  app.add_option("--layers", recipe.layers, "encoder layers")->check(examples::above(0))->capture_default_str();
  app.add_option("--heads", recipe.heads, "attention heads")->check(examples::above(0))->capture_default_str();
  app.add_option("--dropout", recipe.dropout, "dropout probability")->check(examples::between(0.0, 0.9))->capture_default_str();
  app.add_option("--minutes", minutes, "stop training after this long even if epochs remain")->check(examples::above(0))->capture_default_str();
  app.add_option("--predict", sentence, "classify this sentence with the saved model instead of training");
  app.add_option("--layer", layer, "--predict: the layer whose attention is drawn (-1: the last)")->capture_default_str();
  app.add_option("--head", head, "--predict: the attention head drawn")->check(examples::at_least(0))->capture_default_str();

  return examples::run_main(app, argc, argv, common, [&]() -> int {
    // BERT's runs keep their own folder: its config.json is a BertConfig, not the recipe.
    if (model_kind == "bert" && app.count("--out") == 0) common.out_dir = "out/text_classifier_bert";
    if (app.count("--predict") > 0) {
      return model_kind == "bert" ? predict_bert(common, sentence, layer, head) : predict(common, sentence, layer, head);
    }
    EMBER_CHECK(init_from.empty() || config_from.empty(), "text_classifier: --init-from {} brings its own network; "
                "--config-from {} is for training that network from scratch", init_from, config_from);
    const Device device = examples::setup_run(common);

    // 1. Data.
    const datasets::SentimentData data = datasets::load_sentiment(common.data_dir);
    std::vector<datasets::LabelledText> train_sentences = data.train;
    MeasuredSplit measured{"test", data.test};
    if (validation_fold > 0) {  // the test sentences stay unread
      datasets::FoldSplit<datasets::LabelledText> fold =
          datasets::cross_validation_fold(data.train, validation_fold - 1, /*folds=*/5);
      train_sentences = std::move(fold.train);
      measured = {"validation", std::move(fold.validation)};
    }
    std::vector<std::string> train_texts;
    std::vector<int64_t> train_labels;
    for (const auto& example : train_sentences) {
      train_texts.push_back(example.text);
      train_labels.push_back(example.label);
    }
    fmt::print("sentences: {} train, {} {} ({} empty records dropped)\n", train_sentences.size(),
               measured.sentences.size(), measured.name, data.empty_dropped + data.malformed_skipped);

    if (model_kind == "bert") {
      return fine_tune_bert(common, device, train_sentences, measured, init_from, config_from, vocab, freeze_encoder,
                            encoder_lr_factor, app.count("--epochs") ? epochs : 8, batch_size,
                            app.count("--lr") ? lr : bert_lr(init_from), weight_decay, minutes);
    }
    EMBER_CHECK(init_from.empty() && config_from.empty() && vocab.empty() && !freeze_encoder,
                "text_classifier: --init-from, --config-from, --vocab and --freeze-encoder go with --model bert");
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

    const auto started = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t loss_count = 0, step = resumed.value_or(0);
    Evaluation last;
    model.train();
    for (step = step + 1; step <= total_steps; ++step) {
      const std::vector<int64_t> rows = schedule.batch(step - 1);
      const datasets::PaddedBatch batch = datasets::pad_batch(datasets::take(train_ids, rows), 0, -1, length_multiple);
      const Tensor targets = tensor(datasets::take(train_labels, rows), {static_cast<int64_t>(rows.size())}).to(device);

      const Tensor loss = train_step({batch.ids.to(device), batch.padding_mask.to(device), targets});
      scheduler.step();

      const double loss_value = loss.item<double>();
      loss_sum += loss_value;
      ++loss_count;
      progress.update(step, {{"loss", loss_value}}, static_cast<double>(rows.size() * distributed::world_size()));

      bool out_of_time =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > 60 * minutes;
      if (data_parallel) out_of_time = train::sum_over_ranks({out_of_time ? 1.0 : 0.0})[0] > 0;  // all stop together
      if (step % steps_per_epoch == 0 || step == total_steps || out_of_time) {
        last = report_epoch(classifier, measured, test_ids, device, step, steps_per_epoch,
                            loss_sum / loss_count, optimizer.lr(0), log, progress);
        loss_sum = 0;
        loss_count = 0;
        saver.save(step);
      }
      if (out_of_time) {
        progress.print_line(fmt::format("time budget of {} minutes reached at step {}", minutes, step));
        break;
      }
    }
    progress.finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    // 5. Save what --predict needs: the weights, the vocabulary and the recipe.
    train::plot_metrics_csv(log.path(), "text classifier");
    if (!examples::is_main_process()) return 0;  // rank 0 writes the files
    nn::save(model, common.out_path("model.safetensors"));
    tokenizer.save(common.out_path("tokenizer.json"));
    save_recipe(recipe, common.out_path("config.json"));
    fmt::print("{} accuracy {:.1f}% after {} steps in {:.0f} s\n", measured.name, 100 * last.accuracy,
               std::min(step, total_steps), seconds);
    return 0;
  });
}
