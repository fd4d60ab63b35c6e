// Worked example 3, "Spelling to sound": an encoder-decoder transformer learns to pronounce
// English words (letters in, ARPAbet phonemes out) from the CMU Pronouncing Dictionary.
//
//   ./build/examples/spelling_to_sound                 # trains for 10 minutes, then evaluates
//   ./build/examples/spelling_to_sound --say "ember"   # pronounces words with the saved model
//   ./build/examples/spelling_to_sound --evaluate      # evaluates the saved model again
//
// Read it top to bottom: the data, the two vocabularies, the model, the batches, the training
// loop under a time budget, the evaluation (greedy decoding and beam search), and the saved
// model put to use.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/config_values.h"
#include "common/options.h"
#include "common/run_main.h"
#include "ember.h"
#include "nn/data/datasets.h"
#include "nn/text/text.h"
#include "nn/train/train.h"

using namespace ember;
using datasets::Pronunciation;

namespace {

// ---- The recipe ------------------------------------------------------------------------------
//
// The defaults are the ones that reached the README's figures in 10 minutes on a 2-core CPU.
struct Recipe {
  // The model: a small transformer, 3 encoder and 3 decoder layers of width 128. Pre-LN
  // (normalising each sublayer's input) trains stably without a long warm-up.
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t d_ff = 512;
  int64_t layers = 3;
  double dropout = 0.0;
  // Training: AdamW, a linear warm-up, then a cosine decay that reaches zero at the last step.
  // Label smoothing keeps the model from becoming over-confident about one pronunciation of an
  // ambiguous spelling.
  int64_t batch = 128;
  double lr = 2e-3;
  int64_t warmup = 400;
  double weight_decay = 0.01;
  double label_smoothing = 0.1;
  double clip_norm = 1.0;
  // The run's length: a time budget, or an exact number of steps.
  double minutes = 10;
  int64_t steps = 0;
  // Evaluation during training, on an evenly spread subset of the test words.
  int64_t eval_every = 250;
  int64_t eval_words = 500;
  // The final evaluation, on every test word.
  int64_t beam_size = 4;
  int64_t beam_words = 0;  // 0: every test word
  // Beam search ranks finished pronunciations by log-probability / length^length_penalty. A
  // pronunciation's length follows from its spelling, so the plain probability (0) ranks best:
  // at 1.0, the translation example's value, longer and wrong pronunciations won (measured: 50.4%
  // word accuracy against greedy's 54.5% on 500 test words).
  double length_penalty = 0.0;
};

// Positions the model can hold: the longest dictionary word has 34 letters and the longest
// pronunciation 32 phonemes.
constexpr int64_t kMaxPositions = 64;

// The letters and phonemes of a word, as ids, and the tokenizers that make them.
//
// Letters are one character each: a CharTokenizer. Phonemes are written as space-separated
// symbols ("EH1 M B ER0"), so a WordTokenizer gives one id per phoneme. Both put [PAD] first
// (id 0), since nn::Transformer masks one pad id on both sides. The target side also gets
// [BOS] and [EOS]: the decoder starts from BOS and says EOS when the pronunciation is complete.
// Neither has an unknown token: a letter or phoneme outside the vocabulary is an error, not
// something to guess around.
struct Vocabularies {
  text::CharTokenizer letters;
  text::WordTokenizer phonemes;

  int64_t pad_id() const { return *phonemes.pad_id(); }
  int64_t bos_id() const { return *phonemes.bos_id(); }
  int64_t eos_id() const { return *phonemes.eos_id(); }

  std::vector<int64_t> encode_letters(const std::string& word) const { return letters.encode(word); }
  // BOS, the phonemes, EOS: the decoder reads all but the last, and predicts all but the first.
  std::vector<int64_t> encode_phonemes(const std::vector<std::string>& phonemes_of_word) const {
    std::vector<int64_t> ids{bos_id()};
    for (const std::string& phoneme : phonemes_of_word) ids.push_back(phonemes.token_to_id(phoneme));
    ids.push_back(eos_id());
    return ids;
  }
  std::vector<std::string> decode_phonemes(const std::vector<int64_t>& ids) const {
    std::vector<std::string> symbols;
    for (const int64_t id : ids) symbols.push_back(phonemes.id_to_token(id));
    return symbols;
  }

  static Vocabularies build(const std::vector<Pronunciation>& words) {
    std::vector<std::string> spellings, pronunciations;
    for (const Pronunciation& word : words) {
      spellings.push_back(word.word);
      pronunciations.push_back(fmt::format("{}", fmt::join(word.phonemes, " ")));
    }
    const text::SpecialTokens letter_specials{.pad = "[PAD]", .unk = "", .bos = "", .eos = ""};
    const text::SpecialTokens phoneme_specials{.pad = "[PAD]", .unk = "", .bos = "[BOS]", .eos = "[EOS]"};
    return {text::CharTokenizer::train(spellings, {.specials = letter_specials}),
            text::WordTokenizer::train(pronunciations, {.specials = phoneme_specials})};
  }
  static Vocabularies load(const std::string& letters_path, const std::string& phonemes_path) {
    Vocabularies vocabularies{text::CharTokenizer::load(letters_path), text::WordTokenizer::load(phonemes_path)};
    EMBER_CHECK(vocabularies.letters.pad_id() == std::optional<int64_t>(0) &&
                    vocabularies.phonemes.pad_id() == std::optional<int64_t>(0) &&
                    vocabularies.phonemes.bos_id() && vocabularies.phonemes.eos_id(),
                "spelling_to_sound: the tokenizers '{}' and '{}' are not this example's (expected [PAD] = 0 in "
                "both, and [BOS], [EOS] for the phonemes)",
                letters_path, phonemes_path);
    return vocabularies;
  }
};

std::string joined(const std::vector<std::string>& phonemes) { return fmt::format("{}", fmt::join(phonemes, " ")); }

// ---- The model -------------------------------------------------------------------------------
//
// nn::Transformer is the encoder-decoder of "Attention Is All You Need". The encoder reads the
// letters, all at once and in both directions; the decoder writes the phonemes one at a time,
// each step attending to the phonemes written so far (causal self-attention) and to every
// letter (cross-attention). Positions are learned vectors: words are short, and a table of 64
// positions costs little.
nn::TransformerOptions model_options(const Recipe& recipe, const Vocabularies& vocabularies) {
  nn::TransformerOptions options;
  options.source_vocab_size = vocabularies.letters.vocab_size();
  options.target_vocab_size = vocabularies.phonemes.vocab_size();
  options.max_len = kMaxPositions;
  options.num_encoder_layers = recipe.layers;
  options.num_decoder_layers = recipe.layers;
  options.layer = {.d_model = recipe.d_model,
                   .num_heads = recipe.heads,
                   .d_ff = recipe.d_ff,
                   .dropout = recipe.dropout,
                   .activation = nn::Activation::ReLU,
                   .norm_first = true};
  options.positions = nn::Positions::Learned;
  // The paper multiplies token embeddings by sqrt(d_model), next to sinusoidal positions whose
  // values lie in [-1, 1]. Here both tables start from N(0, 1) (as PyTorch's nn.Embedding), so
  // that factor would make each letter 11 times louder than its position, and the model would
  // be slow to learn where in the word it is: 32% word accuracy after 1,000 steps with the
  // factor, 47% without.
  options.scale_embeddings = false;
  options.pad_id = vocabularies.pad_id();
  return options;
}

// The saved model's description (config.json): enough to rebuild it for --say, and the step
// count a --resume continues to.
nlohmann::json config_json(const Recipe& recipe, int64_t total_steps, int64_t longest_word) {
  return {{"model",
           {{"d_model", recipe.d_model},
            {"heads", recipe.heads},
            {"d_ff", recipe.d_ff},
            {"encoder_layers", recipe.layers},
            {"decoder_layers", recipe.layers},
            {"dropout", recipe.dropout},
            {"max_positions", kMaxPositions}}},
          {"letters", "letters.json"},
          {"phonemes", "phonemes.json"},
          {"weights", "model.safetensors"},
          {"longest_word", longest_word},
          {"training",
           {{"total_steps", total_steps},
            {"batch", recipe.batch},
            {"lr", recipe.lr},
            {"warmup", recipe.warmup},
            {"weight_decay", recipe.weight_decay},
            {"label_smoothing", recipe.label_smoothing}}}};
}

void write_json(const std::string& path, const nlohmann::json& document) {
  nn::write_file_atomically(path, document.dump(2) + "\n");
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream file(path);
  EMBER_CHECK(file.good(), "spelling_to_sound: cannot open '{}'", path);
  try {
    return nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& error) {
    fail("spelling_to_sound: '{}' is not valid JSON: {}", path, error.what());
  }
}

// ---- Evaluation ------------------------------------------------------------------------------
//
// Word accuracy: the whole pronunciation right, every phoneme and stress digit. Phoneme error
// rate (PER): the edits (insertions, deletions, substitutions) that turn the predicted phonemes
// into the reference, over the reference's length, summed over the words.
struct Evaluation {
  double word_accuracy = 0;
  double phoneme_error_rate = 0;
  double seconds = 0;
  std::vector<std::vector<std::string>> predictions;  // in the order of the words given
};

// How long a pronunciation may grow: a few letters read as many phonemes (an abbreviation such
// as "WWW"), so allow twice the letters and some.
int64_t decode_limit(int64_t letters) { return std::min<int64_t>(2 * letters + 8, kMaxPositions - 1); }

// Decodes the words in batches of similar length (less padding, and a batch stops as soon as
// its longest pronunciation is done), greedily when beam_size is 1, by beam search otherwise.
Evaluation evaluate(nn::Transformer& model, const Vocabularies& vocabularies, const std::vector<Pronunciation>& words,
                    int64_t beam_size, double length_penalty, Device device) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> order(words.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return words[a].word.size() < words[b].word.size(); });

  // Beam search decodes beam_size rows per word: keep the rows per batch about the same.
  const int64_t batch_size = std::max<int64_t>(512 / beam_size, 16);
  Evaluation evaluation;
  evaluation.predictions.resize(words.size());
  train::ErrorRate errors;
  int64_t correct = 0;
  for (size_t first = 0; first < order.size(); first += batch_size) {
    const std::vector<int64_t> indices(order.begin() + first,
                                       order.begin() + std::min(order.size(), first + batch_size));
    std::vector<std::vector<int64_t>> letters;
    for (const int64_t i : indices) letters.push_back(vocabularies.encode_letters(words[i].word));
    const datasets::PaddedBatch batch = datasets::pad_batch(letters, vocabularies.pad_id());
    nn::DecodeOptions options{.bos_id = vocabularies.bos_id(),
                              .eos_id = vocabularies.eos_id(),
                              .max_length = decode_limit(batch.ids.size(1)),
                              .beam_size = beam_size,
                              .length_penalty = length_penalty};
    const Tensor source = batch.ids.to(device);
    const auto decoded = beam_size == 1 ? model.greedy_decode(source, options) : model.beam_search(source, options);
    for (size_t row = 0; row < indices.size(); ++row) {
      const Pronunciation& word = words[indices[row]];
      std::vector<std::string> predicted = vocabularies.decode_phonemes(decoded[row]);
      correct += predicted == word.phonemes ? 1 : 0;
      errors.add(predicted, word.phonemes);
      evaluation.predictions[indices[row]] = std::move(predicted);
    }
  }
  evaluation.word_accuracy = static_cast<double>(correct) / static_cast<double>(words.size());
  evaluation.phoneme_error_rate = errors.rate();
  evaluation.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return evaluation;
}

// A few words with what the model says and what the dictionary says, as a tutorial shows them.
void print_examples(const std::vector<Pronunciation>& words, const Evaluation& evaluation, int64_t count) {
  const int64_t step = std::max<int64_t>(static_cast<int64_t>(words.size()) / count, 1);
  for (int64_t k = 0; k < count && k * step < static_cast<int64_t>(words.size()); ++k) {
    const size_t i = static_cast<size_t>(k * step + step / 2) % words.size();
    const bool right = evaluation.predictions[i] == words[i].phonemes;
    fmt::print("    {:<14} {:<28} {}{}\n", words[i].word, joined(evaluation.predictions[i]), right ? "ok" : "want ",
               right ? "" : joined(words[i].phonemes));
  }
}

// Every n-th test word, for the evaluations during training: the test split is in alphabetical
// order, so an even spread covers every initial letter.
std::vector<Pronunciation> spread_subset(const std::vector<Pronunciation>& words, int64_t count) {
  if (count <= 0 || count >= static_cast<int64_t>(words.size())) return words;
  std::vector<Pronunciation> subset;
  for (int64_t k = 0; k < count; ++k) subset.push_back(words[k * words.size() / count]);
  return subset;
}

// ---- Training --------------------------------------------------------------------------------

// The final evaluation on every test word: greedy decoding takes the most likely phoneme at each
// step; beam search keeps the beam_size most likely prefixes, and can recover when the best
// first phoneme leads to a worse whole. Prints both and returns them for results.json.
nlohmann::json evaluate_test_split(nn::Transformer& model, const Vocabularies& vocabularies,
                                   const std::vector<Pronunciation>& test, const Recipe& recipe, Device device) {
  fmt::print("\n7. evaluation on the {} test words\n", test.size());
  const Evaluation greedy = evaluate(model, vocabularies, test, 1, 0.0, device);
  fmt::print("   greedy:       word accuracy {:.1f}%, PER {:.1f}% ({:.1f} s)\n", 100 * greedy.word_accuracy,
             100 * greedy.phoneme_error_rate, greedy.seconds);
  print_examples(test, greedy, 8);
  std::fflush(stdout);
  const std::vector<Pronunciation> beam_words = spread_subset(test, recipe.beam_words);
  const Evaluation beam = evaluate(model, vocabularies, beam_words, recipe.beam_size, recipe.length_penalty, device);
  fmt::print("   beam of {}:    word accuracy {:.1f}%, PER {:.1f}% ({:.1f} s{})\n", recipe.beam_size,
             100 * beam.word_accuracy, 100 * beam.phoneme_error_rate, beam.seconds,
             beam_words.size() == test.size() ? "" : fmt::format(", on {} of the test words", beam_words.size()));
  return {{"test_words", test.size()},
          {"greedy", {{"word_accuracy", greedy.word_accuracy}, {"phoneme_error_rate", greedy.phoneme_error_rate}}},
          {"beam", {{"beam_size", recipe.beam_size},
                    {"length_penalty", recipe.length_penalty},
                    {"words", beam_words.size()},
                    {"word_accuracy", beam.word_accuracy},
                    {"phoneme_error_rate", beam.phoneme_error_rate}}}};
}

void train_model(const Recipe& recipe, const examples::CommonOptions& common) {
  const Device device = examples::setup_run(common);

  // 1. The data: CMUdict with the split of DATA.md (variants and words with other characters
  //    than A-Z and ' dropped; every 20th word is a test word).
  const datasets::CmudictData data = datasets::load_cmudict(common.data_dir);
  fmt::print("\n1. data: {} training words, {} test words ({} variant pronunciations and {} other words left out)\n",
             data.train.size(), data.test.size(), data.variants_dropped, data.words_filtered);
  for (size_t i = 0; i < 3; ++i) {
    const Pronunciation& word = data.train[data.train.size() / 4 * (i + 1)];
    fmt::print("   {:<12} {}\n", word.word, joined(word.phonemes));
  }

  // 2. The vocabularies, from the training words only.
  const Vocabularies vocabularies = Vocabularies::build(data.train);
  fmt::print("\n2. vocabularies: {} letters and {} phonemes, with the special tokens\n",
             vocabularies.letters.vocab_size() - 1, vocabularies.phonemes.vocab_size() - 3);
  {
    const Pronunciation& word = data.train[data.train.size() / 2];
    fmt::print("   {} -> letters {}, phonemes {}\n", word.word, vocabularies.encode_letters(word.word),
               vocabularies.encode_phonemes(word.phonemes));
  }
  std::vector<std::vector<int64_t>> source_ids, target_ids;
  std::vector<int64_t> lengths;
  int64_t longest_word = 0;
  for (const Pronunciation& word : data.train) {
    source_ids.push_back(vocabularies.encode_letters(word.word));
    target_ids.push_back(vocabularies.encode_phonemes(word.phonemes));
    // The decoder reads one token fewer than the pronunciation's ids.
    lengths.push_back(std::max<int64_t>(source_ids.back().size(), target_ids.back().size() - 1));
    longest_word = std::max<int64_t>(longest_word, source_ids.back().size());
  }

  // 3. The model.
  auto model = std::make_shared<nn::Transformer>(model_options(recipe, vocabularies));
  model->to(device);
  fmt::print("\n3. model: nn::Transformer, {} + {} pre-LN layers, d_model {}, {} heads, d_ff {}: {} parameters\n",
             recipe.layers, recipe.layers, recipe.d_model, recipe.heads, recipe.d_ff, model->num_parameters());

  // 4. The batches. Sorting words of similar length into the same batch (bucketing) cuts the
  //    padding, which costs as much compute as real letters; the buckets are shuffled, so every
  //    step still sees a random part of the dictionary. The schedule is fixed by the seed: a
  //    resumed run sees the same batches.
  auto schedule = datasets::BatchSchedule::bucketed(lengths, {.batch_size = recipe.batch}, common.seed);
  {
    int64_t real = 0, padded = 0;
    for (const auto& batch : schedule.epoch(0)) {
      int64_t longest = 0;
      for (const int64_t i : batch) {
        real += lengths[i];
        longest = std::max(longest, lengths[i]);
      }
      padded += longest * static_cast<int64_t>(batch.size());
    }
    fmt::print("\n4. batches: {} of {} words an epoch, bucketed by length: {:.0f}% of the positions are padding\n",
               schedule.batches_in_epoch(0), recipe.batch, 100.0 * (padded - real) / padded);
  }

  // 5. Training. AdamW with decoupled weight decay on the matrices only (not on biases and
  //    LayerNorm gains), and a learning-rate schedule that needs the total number of steps.
  nn::AdamW optimizer(nn::weight_decay_groups(*model, recipe.weight_decay), {.lr = recipe.lr});
  // --precision fp16 scales the loss; the scale is saved with the checkpoints.
  const train::Precision precision = common.precision_choice();
  nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});
  // (A run too short for the warm-up warms up for half of its steps.)
  auto schedule_for = [&](int64_t total) {
    return std::make_shared<nn::WarmupCosine>(recipe.lr, std::min(recipe.warmup, total / 2), total);
  };
  const std::string checkpoint_path = common.out_path("checkpoint.safetensors");
  const std::string config_path = common.out_path("config.json");
  int64_t total_steps = recipe.steps;
  int64_t start = 0;
  std::unique_ptr<nn::Scheduler> scheduler;
  if (common.resume && !std::filesystem::exists(checkpoint_path)) {
    fmt::print("--resume: no checkpoint at {}: starting from step 0\n", checkpoint_path);
  }
  if (common.resume && std::filesystem::exists(checkpoint_path)) {
    // A resumed run continues the schedule it was planned with.
    const int64_t planned = examples::config_integer(read_json(config_path).at("training"), "total_steps", config_path);
    if (total_steps != 0 && total_steps != planned) {
      fmt::print("--resume: continuing the planned {} steps (--steps {} ignored)\n", planned, total_steps);
    }
    total_steps = planned;
    scheduler = std::make_unique<nn::Scheduler>(optimizer, schedule_for(total_steps));
    std::string found;
    start = *train::resume_from(checkpoint_path, *model, optimizer, scheduler.get(), &found, &scaler);
    fmt::print("--resume: {} (of {} steps)\n", found, total_steps);
  } else if (total_steps > 0) {
    scheduler = std::make_unique<nn::Scheduler>(optimizer, schedule_for(total_steps));
  } else {
    // --steps 0: the step count is planned from the time budget after a few steps. Until then
    // the warm-up runs, and the warm-up does not depend on the total: a schedule with a far
    // total gives the same rates.
    scheduler = std::make_unique<nn::Scheduler>(optimizer, schedule_for(std::max<int64_t>(recipe.warmup, 1) * 1000));
  }
  const int64_t plan_at = total_steps > 0 ? 0 : std::clamp<int64_t>(recipe.warmup, 10, 40);

  const std::vector<Pronunciation> eval_words = spread_subset(data.test, recipe.eval_words);
  const std::vector<std::string> metric_names{"train_loss", "word_accuracy", "phoneme_error_rate", "lr", "elapsed_s"};
  std::optional<int64_t> resumed_at;
  if (start > 0) resumed_at = start;
  train::MetricsLog log(common.out_path("metrics.csv"), metric_names, resumed_at);
  std::unique_ptr<train::CheckpointSaver> saver;
  std::unique_ptr<train::ProgressBar> progress;
  // Once the step count is known: config.json records it (for --resume), checkpoints begin,
  // and so does the progress bar.
  auto fix_step_count = [&](int64_t steps_done, bool show_progress) {
    write_json(config_path, config_json(recipe, total_steps, longest_word));
    saver = std::make_unique<train::CheckpointSaver>(checkpoint_path, recipe.eval_every, *model, optimizer,
                                                     scheduler.get(), &scaler);
    if (show_progress) {
      progress = std::make_unique<train::ProgressBar>(
          total_steps, train::ProgressBarOptions{.label = "train", .unit = "words"}, steps_done);
    }
  };
  if (total_steps > 0) {
    fmt::print("\n5. training for {} steps, evaluating on {} test words every {} steps\n", total_steps,
               eval_words.size(), recipe.eval_every);
    fix_step_count(start, true);
  } else {
    fmt::print("\n5. training for {} minutes: timing the first {} steps to plan the step count\n", recipe.minutes,
               plan_at);
  }

  // An evaluation on the subset, one row of metrics (the mean training loss since the last
  // one), and a checkpoint once the step count is known. Returns the evaluation's seconds.
  double loss_sum = 0;
  int64_t loss_count = 0;
  auto evaluate_during_training = [&](int64_t step, double elapsed) {
    const double train_loss = loss_sum / static_cast<double>(std::max<int64_t>(loss_count, 1));
    loss_sum = 0;
    loss_count = 0;
    const Evaluation evaluation = evaluate(*model, vocabularies, eval_words, 1, 0.0, device);
    model->train();
    const std::string line =
        fmt::format("step {}: train loss {:.3f}; {} test words: word accuracy {:.1f}%, PER {:.1f}% ({:.1f} s)", step,
                    train_loss, eval_words.size(), 100 * evaluation.word_accuracy,
                    100 * evaluation.phoneme_error_rate, evaluation.seconds);
    if (progress) {
      progress->print_line(line);
    } else {
      fmt::print("{}\n", line);
    }
    print_examples(eval_words, evaluation, 4);
    std::fflush(stdout);  // results show up at once in a log file too, not only at the end
    log.write(step, {{"train_loss", train_loss},
                     {"word_accuracy", evaluation.word_accuracy},
                     {"phoneme_error_rate", evaluation.phoneme_error_rate},
                     {"lr", optimizer.lr(0)},
                     {"elapsed_s", elapsed}});
    if (saver) {
      saver->save(step);
      train::plot_metrics_csv(log.path(), "spelling to sound");
    }
    return evaluation.seconds;
  };

  const std::vector<Tensor> parameters = model->parameters();
  const nn::CrossEntropyOptions loss_options{.ignore_index = vocabularies.pad_id(),
                                             .label_smoothing = recipe.label_smoothing};
  // The step itself: forward, loss, backward, clipping, AdamW. On a GPU the step of each batch
  // shape is captured once as a CUDA graph and replayed after (nn/train/graphed_steps.h); words
  // and pronunciations are then padded to a multiple of 8 symbols (which divides kMaxPositions),
  // so the buckets make a few shapes. The schedule runs outside it: a replay reads its rate.
  // With --precision bf16 or fp16 the forward pass and the loss run under autocast; fp16 also
  // scales the loss, and the gradients are unscaled before they are clipped.
  const bool graphs = examples::cuda_graphs_apply(common, device);
  const int64_t length_multiple = graphs ? std::gcd<int64_t>(8, kMaxPositions) : 1;
  train::GraphedSteps forward_backward_update(
      [&](std::span<const Tensor> batch) {  // letters, decoder input, next phonemes
        Tensor loss;
        {
          const AutocastGuard autocast = train::autocast_scope(precision, device.type);
          loss = nn::cross_entropy(model->forward(batch[0], batch[1]), batch[2], loss_options);
        }
        optimizer.zero_grad();
        scaler.scale(loss).backward();
        scaler.unscale_(optimizer);
        nn::clip_grad_norm_(parameters, recipe.clip_norm);
        scaler.step(optimizer);
        scaler.update();
        return loss;
      },
      {.enabled = graphs});
  // The budget paces the schedule: should the steps turn out slower than planned, it ends with
  // the time rather than at the planned step.
  train::TimeBudget budget({.seconds = recipe.minutes * 60});
  budget.pace(*scheduler, total_steps);
  int64_t step = start;
  model->train();
  while (!budget.finished()) {
    ++step;
    const std::vector<int64_t> indices = schedule.batch(step - 1);
    const datasets::PaddedBatch letters =
        datasets::pad_batch(datasets::take(source_ids, indices), vocabularies.pad_id(), -1, length_multiple);
    const datasets::PaddedBatch phonemes =
        datasets::pad_batch(datasets::take(target_ids, indices), vocabularies.pad_id(), -1, length_multiple);
    // Teacher forcing: the decoder reads BOS and the true phonemes, and at every position
    // predicts the next one (the last prediction is EOS). Padding is ignored by the loss.
    const Tensor decoder_input = phonemes.ids.slice(1, 0, -1).to(device);
    const Tensor next_phonemes = phonemes.ids.slice(1, 1, std::nullopt).contiguous().to(device);
    const Tensor loss = forward_backward_update({letters.ids.to(device), decoder_input, next_phonemes});
    budget.step_done();  // the schedule's next step, or further if the time runs short
    const double loss_value = loss.item();
    loss_sum += loss_value;
    ++loss_count;

    if (progress) {
      progress->update(step, {{"loss", loss_value}, {"lr", optimizer.lr(0)}}, static_cast<double>(indices.size()));
    }
    if (step == plan_at) {
      // The plan: measure the time of a step (the first 5 warm up caches) and of an evaluation,
      // and fit as many steps as the budget holds. The warm-up is not over yet, so the rest of
      // the schedule can still be fixed to that count.
      const double step_seconds = budget.median_step_seconds(5);
      const double eval_seconds = evaluate_during_training(step, budget.elapsed_seconds());
      const double per_step = step_seconds + eval_seconds / static_cast<double>(recipe.eval_every);
      total_steps = step + std::max<int64_t>(budget.steps_that_fit(per_step), 1);
      fmt::print("{:.3f} s a step, {:.1f} s an evaluation: {} steps fit in {} minutes (--steps {} repeats this run)\n",
                 step_seconds, eval_seconds, total_steps, recipe.minutes, total_steps);
      auto planned = std::make_unique<nn::Scheduler>(optimizer, schedule_for(total_steps));
      for (int64_t s = 0; s < step; ++s) planned->step();  // catch up to this step
      scheduler = std::move(planned);
      budget.pace(*scheduler, total_steps);
      fix_step_count(step, true);
    } else if (step % recipe.eval_every == 0 || step == total_steps) {
      evaluate_during_training(step, budget.elapsed_seconds());
    }
  }
  if (progress) progress->finish();
  if (budget.out_of_time() && total_steps == 0) {
    fmt::print("the {}-minute budget ran out at step {}, before the step count was planned\n", recipe.minutes, step);
  } else if (budget.out_of_time() && step < total_steps) {
    fmt::print("the {}-minute budget ran out at step {} of {}; the learning rate's schedule was paced to end with it\n",
               recipe.minutes, step, total_steps);
  }
  const double training_seconds = budget.elapsed_seconds();
  if (total_steps == 0) {  // the budget ran out before the plan: the run is what it did
    total_steps = step;
    fix_step_count(step, false);
  }
  if (saver->last_saved_step() != step) saver->save(step);

  // 6. The trained model, its vocabularies and its description, for --say.
  nn::save(*model, common.out_path("model.safetensors"));
  vocabularies.letters.save(common.out_path("letters.json"));
  vocabularies.phonemes.save(common.out_path("phonemes.json"));
  fmt::print("\n6. trained {} steps in {:.0f} s; saved the model and its vocabularies in {}/\n", step,
             training_seconds, common.out_dir);

  // 7. The whole test split, greedy and by beam search.
  nlohmann::json results = evaluate_test_split(*model, vocabularies, data.test, recipe, device);
  results["steps"] = step;
  results["training_seconds"] = training_seconds;
  write_json(common.out_path("results.json"), results);
  train::plot_metrics_csv(log.path(), "spelling to sound");
}

// ---- Using the model: --say ------------------------------------------------------------------
//
// Beam search spelled out for one word, keeping the `count` most probable pronunciations
// rather than only the best: every step extends each live prefix by every phoneme, scores the
// extensions by their summed log-probability, keeps the best `count`, and sets aside those that
// end with EOS. It stops when `count` complete pronunciations are more probable than any live
// prefix (adding a phoneme only lowers a probability). One word is a small batch, so the
// decoder simply re-reads each prefix from the start.
struct Candidate {
  std::vector<int64_t> phonemes;
  double log_probability = 0;
};

std::vector<Candidate> most_probable_pronunciations(nn::Transformer& model, const Vocabularies& vocabularies,
                                                    const std::vector<int64_t>& letters, int64_t count, Device device) {
  NoGradGuard no_grad;
  const int64_t length = static_cast<int64_t>(letters.size());
  const Tensor source = tensor(letters, {1, length}).to(device);
  const Tensor memory = model.encode(source);
  std::vector<Candidate> live{Candidate{}}, complete;
  for (int64_t step = 0; step < decode_limit(length) && !live.empty(); ++step) {
    const int64_t rows = static_cast<int64_t>(live.size());
    std::vector<int64_t> prefixes;
    for (const Candidate& candidate : live) {
      prefixes.push_back(vocabularies.bos_id());
      prefixes.insert(prefixes.end(), candidate.phonemes.begin(), candidate.phonemes.end());
    }
    const Tensor logits = model.decode(tensor(prefixes, {rows, step + 1}).to(device),
                                       memory.expand({rows, length, memory.size(2)}).contiguous(),
                                       source.expand({rows, length}).contiguous());
    const std::vector<double> log_probs = log_softmax(logits.select(1, -1), -1).to_vector<double>();
    const int64_t vocab = vocabularies.phonemes.vocab_size();
    std::vector<Candidate> extended;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t id = 0; id < vocab; ++id) {
        if (id == vocabularies.pad_id() || id == vocabularies.bos_id()) continue;
        Candidate next = live[r];
        next.log_probability += log_probs[r * vocab + id];
        next.phonemes.push_back(id);
        extended.push_back(std::move(next));
      }
    }
    std::sort(extended.begin(), extended.end(),
              [](const Candidate& a, const Candidate& b) { return a.log_probability > b.log_probability; });
    live.clear();
    for (Candidate& candidate : extended) {
      if (static_cast<int64_t>(live.size()) == count) break;
      if (candidate.phonemes.back() == vocabularies.eos_id()) {
        candidate.phonemes.pop_back();
        complete.push_back(std::move(candidate));
      } else {
        live.push_back(std::move(candidate));
      }
    }
    std::sort(complete.begin(), complete.end(),
              [](const Candidate& a, const Candidate& b) { return a.log_probability > b.log_probability; });
    if (static_cast<int64_t>(complete.size()) > count) complete.resize(count);
    if (static_cast<int64_t>(complete.size()) == count &&
        (live.empty() || live.front().log_probability < complete.back().log_probability)) {
      break;
    }
  }
  return complete;
}

// A word as the model's letters: upper case, only A-Z and the apostrophe, not longer than the
// longest dictionary word.
std::string checked_word(const std::string& word, int64_t longest_word) {
  EMBER_CHECK(!word.empty(), "--say: the word is empty; give a word such as --say \"ember\"");
  std::string upper;
  for (size_t i = 0; i < word.size(); ++i) {
    const char c = word[i];
    if (c == '\'' || (c >= 'A' && c <= 'Z')) {
      upper += c;
    } else if (c >= 'a' && c <= 'z') {
      upper += static_cast<char>(c - 'a' + 'A');
    } else {
      // Name the whole character, all the bytes of its UTF-8 form (10xxxxxx bytes continue it).
      size_t end = i + 1;
      while (end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) ++end;
      fail("--say: \"{}\" has the character '{}' at byte {}: the model knows only the letters A-Z and the "
           "apostrophe",
           word, word.substr(i, end - i), i);
    }
  }
  EMBER_CHECK(static_cast<int64_t>(upper.size()) <= longest_word,
              "--say: \"{}\" has {} letters; the model learned words of at most {}", word, upper.size(), longest_word);
  return upper;
}

// A model this example trained, loaded from its output directory with its vocabularies; `flag`
// (--say, --evaluate) names the request in errors.
struct TrainedModel {
  Recipe recipe;
  int64_t longest_word = 0;
  Vocabularies vocabularies;
  std::shared_ptr<nn::Transformer> model;
};

TrainedModel load_trained(const examples::CommonOptions& common, const char* flag, Device device) {
  const std::string config_path = common.out_path("config.json");
  EMBER_CHECK(std::filesystem::exists(config_path),
              "{}: no trained model in {}/ ({} is missing); train one first with ./build/examples/spelling_to_sound "
              "--out {}",
              flag, common.out_dir, config_path, common.out_dir);
  const nlohmann::json config = read_json(config_path);
  Recipe recipe;
  int64_t longest_word = 0;
  try {
    const nlohmann::json& sizes = config.at("model");
    recipe.d_model = examples::config_integer(sizes, "d_model", config_path);
    recipe.heads = examples::config_integer(sizes, "heads", config_path);
    recipe.d_ff = examples::config_integer(sizes, "d_ff", config_path);
    recipe.layers = examples::config_integer(sizes, "encoder_layers", config_path);
    longest_word = examples::config_integer(config, "longest_word", config_path);
  } catch (const nlohmann::json::exception& error) {
    fail("{}: '{}' is not this example's config: {}", flag, config_path, error.what());
  }
  Vocabularies vocabularies = Vocabularies::load(common.out_path("letters.json"), common.out_path("phonemes.json"));
  const std::string weights_path = common.out_path("model.safetensors");
  EMBER_CHECK(std::filesystem::exists(weights_path),
              "{}: {} is missing: the training in {}/ did not finish (continue it with --resume --out {})", flag,
              weights_path, common.out_dir, common.out_dir);
  auto model = std::make_shared<nn::Transformer>(model_options(recipe, vocabularies));
  nn::load(*model, weights_path);
  model->to(device);
  model->eval();
  return {recipe, longest_word, std::move(vocabularies), std::move(model)};
}

// --evaluate: the final evaluation of a saved model again, with this run's --beam,
// --beam-words and --length-penalty.
void evaluate_saved(const Recipe& evaluation, const examples::CommonOptions& common) {
  const Device device = train::parse_device(common.device);
  train::set_threads(common.threads);
  TrainedModel trained = load_trained(common, "--evaluate", device);
  trained.recipe.beam_size = evaluation.beam_size;
  trained.recipe.beam_words = evaluation.beam_words;
  trained.recipe.length_penalty = evaluation.length_penalty;
  const datasets::CmudictData data = datasets::load_cmudict(common.data_dir);
  evaluate_test_split(*trained.model, trained.vocabularies, data.test, trained.recipe, device);
}

void say(const std::string& words, const examples::CommonOptions& common) {
  const Device device = train::parse_device(common.device);
  train::set_threads(common.threads);
  const TrainedModel trained = load_trained(common, "--say", device);
  nn::Transformer& model = *trained.model;
  const Vocabularies& vocabularies = trained.vocabularies;
  const int64_t longest_word = trained.longest_word;

  std::vector<std::string> list;
  std::string current;
  for (const char c : words + " ") {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!current.empty()) list.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (list.empty()) list.push_back("");  // so that an empty --say says so
  for (const std::string& raw : list) {
    const std::string word = checked_word(raw, longest_word);
    const std::vector<int64_t> letters = vocabularies.encode_letters(word);
    const Tensor source = tensor(letters, {1, static_cast<int64_t>(letters.size())}).to(device);
    const auto greedy = model.greedy_decode(
        source, {.bos_id = vocabularies.bos_id(), .eos_id = vocabularies.eos_id(),
                 .max_length = decode_limit(static_cast<int64_t>(letters.size()))});
    fmt::print("{}\n  greedy          {}\n", word, joined(vocabularies.decode_phonemes(greedy[0])));
    // The probability the model gives each whole pronunciation: the product of its phonemes'.
    const char* label = "most probable";
    for (const Candidate& candidate : most_probable_pronunciations(model, vocabularies, letters, 4, device)) {
      fmt::print("  {:<15} {:<32} p = {:.3f}\n", label, joined(vocabularies.decode_phonemes(candidate.phonemes)),
                 std::exp(candidate.log_probability));
      label = "";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Spelling to sound: an encoder-decoder transformer learns to pronounce English words (CMUdict)"};
  examples::CommonOptions common{.out_dir = "out/spelling_to_sound"};
  examples::add_common_options(app, common);
  Recipe recipe;
  std::optional<std::string> say_words;
  bool evaluate_only = false;
  app.add_option("--say", say_words, "pronounce these words with the saved model (no training)");
  app.add_flag("--evaluate", evaluate_only, "evaluate the saved model on the test split (no training)");
  app.add_option("--minutes", recipe.minutes, "training time budget (the learning rate's schedule ends with it)")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--steps", recipe.steps, "training steps (0: as many as fit in --minutes)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--d-model", recipe.d_model, "model width")->check(examples::above(0))->capture_default_str();
  app.add_option("--heads", recipe.heads, "attention heads")->check(examples::above(0))->capture_default_str();
  app.add_option("--d-ff", recipe.d_ff, "feed-forward width")->check(examples::above(0))->capture_default_str();
  app.add_option("--layers", recipe.layers, "encoder layers, and as many decoder layers")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--dropout", recipe.dropout, "dropout rate")->check(examples::between(0.0, 0.9))->capture_default_str();
  app.add_option("--clip", recipe.clip_norm, "gradient clipping norm")->check(examples::above(0))->capture_default_str();
  app.add_option("--batch", recipe.batch, "words a step")->check(examples::above(0))->capture_default_str();
  app.add_option("--lr", recipe.lr, "peak learning rate")->check(examples::above(0))->capture_default_str();
  app.add_option("--warmup", recipe.warmup, "warm-up steps")->check(examples::at_least(0))->capture_default_str();
  app.add_option("--weight-decay", recipe.weight_decay, "AdamW's weight decay")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--label-smoothing", recipe.label_smoothing, "label smoothing")
      ->check(examples::between(0.0, 0.9))
      ->capture_default_str();
  app.add_option("--eval-every", recipe.eval_every, "steps between evaluations")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--eval-words", recipe.eval_words, "test words evaluated during training (0: all)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--beam", recipe.beam_size, "beam size of the final evaluation")
      ->check(examples::between(1, 32))
      ->capture_default_str();
  app.add_option("--beam-words", recipe.beam_words, "test words evaluated by beam search (0: all)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--length-penalty", recipe.length_penalty, "beam search ranks by log-probability / length^this")
      ->check(examples::between(0.0, 5.0))
      ->capture_default_str();
  return examples::run_main(app, argc, argv, common, [&] {
    if (say_words) {
      say(*say_words, common);
    } else if (evaluate_only) {
      evaluate_saved(recipe, common);
    } else {
      train_model(recipe, common);
    }
  });
}
