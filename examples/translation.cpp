// Worked example 4, "Translation": an encoder-decoder transformer trained from scratch to
// translate German into English, on the example sentences of the Ding dictionary, with one
// byte-pair-encoding vocabulary shared by both languages. Scored by corpus BLEU-4 on the test
// split, with greedy and with beam search.
//
//   ./build/examples/translation                        # train for 20 minutes, then evaluate
//   ./build/examples/translation --translate "Das ist ein kleiner Test."
//   OMP_NUM_THREADS=1 mpirun -np 2 ./build/examples/translation   # data parallel, 2 processes
//
// Read it top to bottom: data, tokenizer, model, the training loop, evaluation, inference.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
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
#include "nn/text/bpe.h"
#include "nn/train/train.h"

using namespace ember;

namespace {

using Clock = std::chrono::steady_clock;
using TokenIds = std::vector<int64_t>;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---- The recipe --------------------------------------------------------------------------
//
// Everything that decides what is trained. It is saved with the model (config.json), so that
// --translate rebuilds the same network and --resume can refuse a run of another recipe.
//
// The data is small (17,786 pairs of short sentences, about 12 words each) and a CPU gives
// 20 minutes, so the CPU recipe is a small model seeing the data many times:
// - a small shared vocabulary: with few sentences, a large vocabulary leaves most of its
//   symbols rare and poorly trained; 4,000 symbols still keep most words in one or two pieces;
// - one embedding table for source, target and output projection (share_embeddings and
//   tie_output): German and English share many pieces (names, numbers, cognates), and a third
//   of the parameters is saved;
// - pre-LN layers, which train stably at a high learning rate without a long warm-up;
// - dropout and label smoothing against overfitting a small corpus;
// - batches of about batch_tokens tokens made of sentences of similar length (bucketing), so
//   little of each batch is padding;
// - AdamW, a short warm-up, then a learning rate falling linearly to zero at the last planned
//   step, so the run ends at a low rate however long it is.
struct Recipe {
  int64_t vocab_size = 4000;
  // A small model: on two CPU cores in 20 minutes, more steps of a small model beat fewer of a
  // large one (measured: d_model 128 and 2+2 layers reached BLEU 5 where 256 and 3+3 were at 2).
  int64_t d_model = 128;
  int64_t layers = 2;  // encoder layers, and as many decoder layers
  int64_t heads = 4;
  int64_t d_ff = 512;
  double dropout = 0.1;
  double label_smoothing = 0.1;
  double lr = 1e-3;
  int64_t warmup_steps = 200;
  double weight_decay = 0.01;
  int64_t batch_tokens = 4096;  // padded tokens per batch (rows x the longest row), each side
  double minutes = 20;          // the time budget: from the start of the program to the last step
  int64_t epochs = 0;           // passes over the training pairs; 0: as many as fit in the budget

  nlohmann::json to_json() const {
    return {{"vocab_size", vocab_size},     {"d_model", d_model},
            {"layers", layers},             {"heads", heads},
            {"d_ff", d_ff},                 {"dropout", dropout},
            {"label_smoothing", label_smoothing}, {"lr", lr},
            {"warmup_steps", warmup_steps}, {"weight_decay", weight_decay},
            {"batch_tokens", batch_tokens}};
  }
};

// The GPU recipe (--recipe gpu): a larger model, trained for longer. A GPU does in a minute
// what takes the CPU recipe its whole budget, so the data is seen up to a hundred times in
// 9 minutes (a run that fits a 10-minute job); stronger dropout keeps the larger model from
// memorising it.
Recipe gpu_recipe() {
  Recipe recipe;
  recipe.vocab_size = 8000;
  recipe.d_model = 512;
  recipe.layers = 6;
  recipe.heads = 8;
  recipe.d_ff = 2048;
  recipe.dropout = 0.3;
  recipe.label_smoothing = 0.1;
  recipe.lr = 5e-4;
  recipe.warmup_steps = 1000;
  recipe.batch_tokens = 8192;
  recipe.epochs = 100;
  recipe.minutes = 9;
  return recipe;
}

// The longest sequence, in tokens, the model is built for (sinusoidal positions up to it).
// Training pairs longer than kMaxTrainTokens are left out (a handful of very long sentences
// would make their batches slow); a sentence to translate may be up to kMaxSourceTokens long.
constexpr int64_t kMaxPositions = 256;
constexpr int64_t kMaxTrainTokens = 64;
constexpr int64_t kMaxSourceTokens = 100;

nn::TransformerOptions model_options(const Recipe& recipe, int64_t pad_id) {
  nn::TransformerOptions options;
  options.source_vocab_size = recipe.vocab_size;
  options.target_vocab_size = recipe.vocab_size;
  options.share_embeddings = true;
  options.tie_output = true;
  options.max_len = kMaxPositions;
  options.num_encoder_layers = recipe.layers;
  options.num_decoder_layers = recipe.layers;
  options.layer.d_model = recipe.d_model;
  options.layer.num_heads = recipe.heads;
  options.layer.d_ff = recipe.d_ff;
  options.layer.dropout = recipe.dropout;
  options.layer.norm_first = true;
  options.pad_id = pad_id;
  return options;
}

// The embedding table is scaled by sqrt(d_model) on the way in and, tied, is also the output
// projection. Drawn from N(0, 1/d_model), its rows come out of the scaling with unit size (as
// large as the positions added to them), and the output logits start near unit size too; the
// default N(0, 1) would make both sqrt(d_model) times too large.
void init_shared_embedding(nn::Transformer& model, int64_t pad_id) {
  NoGradGuard no_grad;
  Tensor weight = model.source_embedding->embedding->weight;
  nn::init::normal_(weight, 0.0, 1.0 / std::sqrt(static_cast<double>(model.options().layer.d_model)));
  Tensor pad_row = weight.select(0, pad_id);
  pad_row.zero_();
}

// The BPE pieces of a text, separated by spaces, with the space that starts a word shown as
// '▁': "Das ▁ist ▁ein ▁klein er ▁T est ."
std::string pieces_text(const text::BpeTokenizer& tokenizer, const std::string& text) {
  std::string joined;
  for (const std::string& piece : tokenizer.tokenize(text)) {
    if (!joined.empty()) joined += ' ';
    joined += piece.starts_with(' ') ? "\u2581" + piece.substr(1) : piece;
  }
  return joined;
}

// ---- Sentences as token ids ----------------------------------------------------------------
//
// Source: the German tokens then EOS. Target: BOS, the English tokens, EOS. The decoder reads
// the target without its last token and learns to predict it shifted by one: after BOS the
// first English token, ..., after the last token EOS.
struct EncodedPairs {
  std::vector<TokenIds> source, target;
  std::vector<std::string> german, english;
};

EncodedPairs encode_pairs(const text::BpeTokenizer& tokenizer, const std::vector<datasets::GermanEnglishPair>& pairs,
                          int64_t max_tokens, int64_t* dropped) {
  EncodedPairs encoded;
  for (const auto& pair : pairs) {
    TokenIds source = tokenizer.encode(pair.german);
    source.push_back(*tokenizer.eos_id());
    const TokenIds target = tokenizer.encode_with_specials(pair.english);
    if (max_tokens > 0 && std::max(source.size(), target.size()) > static_cast<size_t>(max_tokens)) {
      if (dropped) ++*dropped;
      continue;
    }
    encoded.source.push_back(std::move(source));
    encoded.target.push_back(target);
    encoded.german.push_back(pair.german);
    encoded.english.push_back(pair.english);
  }
  return encoded;
}

// ---- Evaluation ------------------------------------------------------------------------------

// Indices 0..n-1 ordered by the length of `sequences`, cut into batches of `batch_size`: the
// fixed batches evaluation uses (similar lengths, so little padding).
std::vector<std::vector<int64_t>> length_sorted_batches(const std::vector<TokenIds>& sequences, int64_t batch_size) {
  std::vector<int64_t> order(sequences.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return sequences[a].size() < sequences[b].size(); });
  std::vector<std::vector<int64_t>> batches;
  for (size_t start = 0; start < order.size(); start += batch_size) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch_size));
    batches.emplace_back(order.begin() + start, order.begin() + end);
  }
  return batches;
}

// Mean cross-entropy per target token (nats, no label smoothing) over the given pairs.
double test_loss(nn::Transformer& model, const EncodedPairs& pairs, int64_t pad_id, Device device) {
  model.eval();
  NoGradGuard no_grad;
  double total = 0;
  int64_t tokens = 0;
  // Under mpirun each rank takes every world_size-th batch, and the sums are totalled.
  const auto batches = length_sorted_batches(pairs.target, 64);
  for (size_t b = static_cast<size_t>(distributed::rank()); b < batches.size();
       b += static_cast<size_t>(distributed::world_size())) {
    const auto& indices = batches[b];
    const Tensor source = datasets::pad_batch(datasets::take(pairs.source, indices), pad_id).ids.to(device);
    const Tensor target = datasets::pad_batch(datasets::take(pairs.target, indices), pad_id).ids.to(device);
    const int64_t length = target.size(1) - 1;
    const Tensor logits = model.forward(source, target.narrow(1, 0, length));
    const Tensor labels = target.narrow(1, 1, length).contiguous();
    total += nn::cross_entropy(logits, labels, {.ignore_index = pad_id, .reduction = Reduction::Sum}).item();
    for (const int64_t index : indices) tokens += static_cast<int64_t>(pairs.target[index].size()) - 1;
  }
  model.train();
  const std::vector<double> totals = train::sum_over_ranks({total, static_cast<double>(tokens)});
  return totals[0] / totals[1];
}

// Translates every source sentence, in batches of similar length, by greedy search
// (beam_size 1) or beam search. Returns the English text of each, in the order given.
std::vector<std::string> translate_all(nn::Transformer& model, const text::BpeTokenizer& tokenizer,
                                       const std::vector<TokenIds>& sources, int64_t beam_size,
                                       double length_penalty, Device device) {
  std::vector<std::string> outputs(sources.size());
  const int64_t pad_id = *tokenizer.pad_id();
  // A beam multiplies the rows the decoder runs, so its batches hold fewer sentences.
  const int64_t batch_size = beam_size == 1 ? 128 : std::max<int64_t>(16, 256 / beam_size);
  for (const auto& indices : length_sorted_batches(sources, batch_size)) {
    const datasets::PaddedBatch batch = datasets::pad_batch(datasets::take(sources, indices), pad_id);
    nn::DecodeOptions options;
    options.bos_id = *tokenizer.bos_id();
    options.eos_id = *tokenizer.eos_id();
    options.beam_size = beam_size;
    options.length_penalty = length_penalty;
    // An English sentence is rarely more than twice as long as its German one; the limit
    // stops a model that never says EOS.
    options.max_length = std::min<int64_t>(kMaxPositions - 1, 2 * batch.ids.size(1) + 10);
    const Tensor source = batch.ids.to(device);
    const std::vector<TokenIds> ids =
        beam_size == 1 ? model.greedy_decode(source, options) : model.beam_search(source, options);
    for (size_t i = 0; i < indices.size(); ++i) outputs[indices[i]] = tokenizer.decode(ids[i]);
  }
  return outputs;
}

// Corpus BLEU-4 of translations against the references, both split by train::bleu_tokens.
train::BleuScore bleu(const std::vector<std::string>& outputs, const std::vector<std::string>& references) {
  std::vector<std::vector<std::string>> hypotheses, reference_tokens;
  for (size_t i = 0; i < outputs.size(); ++i) {
    hypotheses.push_back(train::bleu_tokens(outputs[i]));
    reference_tokens.push_back(train::bleu_tokens(references[i]));
  }
  return train::corpus_bleu(hypotheses, reference_tokens);
}

// The pairs at `indices`, as a smaller EncodedPairs.
EncodedPairs subset(const EncodedPairs& pairs, const std::vector<int64_t>& indices) {
  return {datasets::take(pairs.source, indices), datasets::take(pairs.target, indices),
          datasets::take(pairs.german, indices), datasets::take(pairs.english, indices)};
}

void print_translations(const EncodedPairs& pairs, const std::vector<std::string>& outputs,
                        const std::vector<int64_t>& which, const std::string& label) {
  for (const int64_t i : which) {
    fmt::print("    German:    {}\n    reference: {}\n    {:<10} {}\n", pairs.german[i], pairs.english[i],
               label + ":", outputs[i]);
  }
}

// ---- Files of a run ----------------------------------------------------------------------------

nlohmann::json read_json(const std::string& path) {
  std::ifstream file(path);
  EMBER_CHECK(file, "translation: cannot open {}", path);
  try {
    return nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& error) {
    fail("translation: {} is not valid JSON ({})", path, error.what());
  }
}

Recipe recipe_from_json(const nlohmann::json& json, const std::string& path) {
  Recipe recipe;
  try {
    recipe.vocab_size = examples::config_integer(json, "vocab_size", path);
    recipe.d_model = examples::config_integer(json, "d_model", path);
    recipe.layers = examples::config_integer(json, "layers", path);
    recipe.heads = examples::config_integer(json, "heads", path);
    recipe.d_ff = examples::config_integer(json, "d_ff", path);
    recipe.dropout = json.at("dropout").get<double>();
    recipe.label_smoothing = json.at("label_smoothing").get<double>();
    recipe.lr = json.at("lr").get<double>();
    recipe.warmup_steps = examples::config_integer(json, "warmup_steps", path);
    recipe.weight_decay = json.at("weight_decay").get<double>();
    recipe.batch_tokens = examples::config_integer(json, "batch_tokens", path);
  } catch (const nlohmann::json::exception& error) {
    fail("translation: {} does not hold a recipe ({})", path, error.what());
  }
  return recipe;
}

// The names of the recipe settings in which two recipes differ, "d_model 256 vs 128, ...".
std::string recipe_differences(const Recipe& saved, const Recipe& asked) {
  const nlohmann::json a = saved.to_json(), b = asked.to_json();
  std::string differences;
  for (const auto& [key, value] : a.items()) {
    if (value != b.at(key)) {
      differences += fmt::format("{}{} {} (saved) vs {} (asked)", differences.empty() ? "" : ", ", key,
                                 value.dump(), b.at(key).dump());
    }
  }
  return differences;
}

// ---- --translate: the saved model at work ----------------------------------------------------

void translate_sentence(const examples::CommonOptions& common, const std::string& sentence, int64_t beam_size,
                        double length_penalty) {
  const std::string config_path = common.out_path("config.json");
  const std::string model_path = common.out_path("model.safetensors");
  for (const std::string& path : {config_path, common.out_path("tokenizer.json"), model_path}) {
    EMBER_CHECK(std::filesystem::exists(path),
                "--translate: {} not found; train a model first (./build/examples/translation --out {})", path,
                common.out_dir);
  }
  const Device device = examples::setup_run(common);
  const Recipe recipe = recipe_from_json(read_json(config_path), config_path);
  const text::BpeTokenizer tokenizer = text::BpeTokenizer::load(common.out_path("tokenizer.json"));
  EMBER_CHECK(tokenizer.vocab_size() == recipe.vocab_size,
              "--translate: {} has {} symbols but {} says the model has {}; they come from different runs",
              common.out_path("tokenizer.json"), tokenizer.vocab_size(), config_path, recipe.vocab_size);

  // Byte-level BPE has no unknown characters, so the only sentences it cannot take are empty
  // ones and ones longer than the model's positions.
  const bool blank = std::all_of(sentence.begin(), sentence.end(), [](unsigned char c) { return std::isspace(c); });
  EMBER_CHECK(!blank, "--translate: the sentence is empty; give a German sentence, e.g. --translate \"{}\"",
              "Das ist ein kleiner Test.");
  TokenIds source = tokenizer.encode(sentence);
  source.push_back(*tokenizer.eos_id());
  EMBER_CHECK(static_cast<int64_t>(source.size()) <= kMaxSourceTokens,
              "--translate: the sentence is {} tokens long; the model takes at most {} (it was trained on "
              "sentences of up to {})",
              source.size(), kMaxSourceTokens, kMaxTrainTokens);

  manual_seed(common.seed);
  nn::Transformer model(model_options(recipe, *tokenizer.pad_id()));
  try {
    nn::load(model, model_path);
  } catch (const Error& error) {  // weights of another configuration: say which files disagree
    fail("--translate: {} does not match {} ({})", model_path, config_path, error.what());
  }
  model.to(device);

  fmt::print("German:  {}\n", sentence);
  fmt::print("pieces:  {}\n", pieces_text(tokenizer, sentence));
  const std::vector<TokenIds> sources{source};
  fmt::print("greedy:  {}\n", translate_all(model, tokenizer, sources, 1, length_penalty, device).front());
  fmt::print("beam {}:  {}\n", beam_size, translate_all(model, tokenizer, sources, beam_size, length_penalty, device).front());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a German-to-English transformer on the Ding dictionary's sentence pairs"};
  examples::CommonOptions common{.out_dir = "out/translation"};
  examples::add_common_options(app, common);

  Recipe recipe;
  std::string recipe_name = "cpu";
  int64_t steps = 0, eval_every = 0, eval_sentences = 200, beam_size = 4;
  double length_penalty = 1.0;
  std::string sentence;
  app.add_option("--recipe", recipe_name,
                 "cpu: the defaults below; gpu: vocab 8000, d_model 512, 6+6 layers, 8 heads, d_ff 2048, dropout "
                 "0.3, lr 5e-4, warmup 1000, 8192-token batches, 9 minutes (options given as well override it)")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  app.add_option("--minutes", recipe.minutes, "time budget, from the start to the last training step")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--epochs", recipe.epochs, "passes over the training pairs (0: as many as fit in --minutes)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--steps", steps, "training steps (0: as many as fit in --minutes, measured after a few steps)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--vocab", recipe.vocab_size, "BPE vocabulary size, shared by German and English")
      ->check(examples::between(text::BpeTokenizer::kBaseVocabSize, 1000000))
      ->capture_default_str();
  app.add_option("--d-model", recipe.d_model, "model width")->check(examples::above(0))->capture_default_str();
  app.add_option("--layers", recipe.layers, "encoder layers, and as many decoder layers")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--heads", recipe.heads, "attention heads")->check(examples::above(0))->capture_default_str();
  app.add_option("--d-ff", recipe.d_ff, "feed-forward width")->check(examples::above(0))->capture_default_str();
  app.add_option("--dropout", recipe.dropout, "dropout rate")->check(examples::between(0.0, 0.9))->capture_default_str();
  app.add_option("--label-smoothing", recipe.label_smoothing, "label smoothing")
      ->check(examples::between(0.0, 0.9))
      ->capture_default_str();
  app.add_option("--lr", recipe.lr, "peak learning rate (AdamW)")->check(examples::above(0))->capture_default_str();
  app.add_option("--warmup", recipe.warmup_steps, "warm-up steps")->check(examples::above(0))->capture_default_str();
  app.add_option("--weight-decay", recipe.weight_decay, "AdamW weight decay")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--batch-tokens", recipe.batch_tokens, "padded tokens per batch")
      ->check(examples::between(kMaxTrainTokens, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--eval-every", eval_every, "steps between evaluations (0: a tenth of the run)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--eval-sentences", eval_sentences, "test sentences translated at each evaluation")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--beam", beam_size, "beam size")->check(examples::between(1, 64))->capture_default_str();
  app.add_option("--length-penalty", length_penalty, "beam search: score / length^penalty")
      ->check(examples::between(0.0, 5.0))
      ->capture_default_str();
  app.add_option("--translate", sentence, "translate this German sentence with the model saved in --out");

  return examples::run_main(app, argc, argv, common, [&] {
    if (app.count("--translate")) return translate_sentence(common, sentence, beam_size, length_penalty);

    // --recipe gpu replaces the defaults, not the options given on the command line.
    if (recipe_name == "gpu") {
      const Recipe gpu = gpu_recipe();
      auto take_default = [&](const char* option, auto& field, const auto& value) {
        if (app.count(option) == 0) field = value;
      };
      take_default("--vocab", recipe.vocab_size, gpu.vocab_size);
      take_default("--d-model", recipe.d_model, gpu.d_model);
      take_default("--layers", recipe.layers, gpu.layers);
      take_default("--heads", recipe.heads, gpu.heads);
      take_default("--d-ff", recipe.d_ff, gpu.d_ff);
      take_default("--dropout", recipe.dropout, gpu.dropout);
      take_default("--label-smoothing", recipe.label_smoothing, gpu.label_smoothing);
      take_default("--lr", recipe.lr, gpu.lr);
      take_default("--warmup", recipe.warmup_steps, gpu.warmup_steps);
      take_default("--weight-decay", recipe.weight_decay, gpu.weight_decay);
      take_default("--batch-tokens", recipe.batch_tokens, gpu.batch_tokens);
      take_default("--minutes", recipe.minutes, gpu.minutes);
      take_default("--epochs", recipe.epochs, gpu.epochs);
    }
    EMBER_CHECK(recipe.d_model % recipe.heads == 0, "--heads {} must divide --d-model {}", recipe.heads,
                recipe.d_model);
    const auto program_start = Clock::now();
    train::TimeBudget budget({.seconds = recipe.minutes * 60});
    const Device device = examples::setup_run(common);

    // ---- 1. The data ----------------------------------------------------------------------
    // load_de_en extracts the sentence pairs from the dictionary and splits them as DATA.md
    // says: sorted, every 20th pair is test. A missing file names the fetch command.
    const datasets::GermanEnglishData data = datasets::load_de_en(common.data_dir);
    fmt::print("\n1. data: {} training pairs, {} test pairs\n", data.train.size(), data.test.size());
    fmt::print("   e.g. {} -> {}\n", data.train[1000].german, data.train[1000].english);

    // ---- 2. One BPE vocabulary for both languages ---------------------------------------------
    // Trained on the German and the English training sentences together. Every byte is a base
    // symbol, so any text can be encoded: no word is ever unknown, only split into more pieces.
    // A resumed run reloads the tokenizer it saved rather than training it again.
    const std::string tokenizer_path = common.out_path("tokenizer.json");
    const std::string checkpoint_path = common.out_path("checkpoint.safetensors");
    const std::string config_path = common.out_path("config.json");
    const bool resuming = common.resume && std::filesystem::exists(checkpoint_path);
    if (common.resume && !resuming) fmt::print("--resume: no checkpoint at {}: starting from step 0\n", checkpoint_path);
    // The total step count: given, planned from the budget, or, for a resumed run, the one it
    // planned (so that it continues the same learning-rate schedule). A resumed run must use
    // the recipe it started with.
    int64_t total_steps = steps;
    if (resuming) {
      const nlohmann::json config = read_json(config_path);
      const std::string differences = recipe_differences(recipe_from_json(config, config_path), recipe);
      EMBER_CHECK(differences.empty(),
                  "--resume: the run in {} was trained with another recipe: {}; pass the same options, or another "
                  "--out for a new run",
                  common.out_dir, differences);
      try {
        total_steps = examples::config_integer(config, "total_steps", config_path);
      } catch (const nlohmann::json::exception& error) {
        fail("--resume: {} has no step count ({})", config_path, error.what());
      }
    }
    const auto tokenizer_start = Clock::now();
    text::BpeTokenizer tokenizer = [&] {
      if (resuming) return text::BpeTokenizer::load(tokenizer_path);
      std::vector<std::string> corpus;
      for (const auto& pair : data.train) {
        corpus.push_back(pair.german);
        corpus.push_back(pair.english);
      }
      return text::BpeTokenizer::train(corpus, recipe.vocab_size);
    }();
    EMBER_CHECK(tokenizer.vocab_size() == recipe.vocab_size,
                "translation: the tokenizer has {} symbols, the recipe asks for {}{}", tokenizer.vocab_size(),
                recipe.vocab_size, resuming ? fmt::format(" ({} comes from another run)", tokenizer_path) : "");
    if (!resuming && examples::is_main_process()) tokenizer.save(tokenizer_path);
    const int64_t pad_id = *tokenizer.pad_id();

    int64_t dropped = 0;
    const EncodedPairs train_pairs = encode_pairs(tokenizer, data.train, kMaxTrainTokens, &dropped);
    const EncodedPairs test_pairs = encode_pairs(tokenizer, data.test, 0, nullptr);
    int64_t train_tokens = 0;
    for (size_t i = 0; i < train_pairs.source.size(); ++i) {
      train_tokens += static_cast<int64_t>(train_pairs.source[i].size() + train_pairs.target[i].size());
    }
    fmt::print("\n2. a shared BPE vocabulary of {} symbols ({}, {:.1f} s)\n", tokenizer.vocab_size(),
               resuming ? "reloaded" : "trained on both languages", seconds_since(tokenizer_start));
    for (const std::string& text : {data.train[1000].german, data.train[1000].english}) {
      fmt::print("   {}\n", pieces_text(tokenizer, text));
    }
    fmt::print("   {:.1f} tokens per sentence on average; {} training pairs longer than {} tokens left out\n",
               static_cast<double>(train_tokens) / (2.0 * static_cast<double>(train_pairs.source.size())), dropped,
               kMaxTrainTokens);

    // ---- 3. The model ------------------------------------------------------------------------
    const nn::TransformerOptions options = model_options(recipe, pad_id);
    auto model = std::make_shared<nn::Transformer>(options);
    init_shared_embedding(*model, pad_id);
    model->to(device);
    fmt::print("\n3. model: Transformer, d_model {}, {}+{} pre-LN layers, {} heads, d_ff {}, dropout {}, one "
               "embedding table for source, target and output: {:.2f}M parameters\n",
               recipe.d_model, recipe.layers, recipe.layers, recipe.heads, recipe.d_ff, recipe.dropout,
               static_cast<double>(model->num_parameters()) / 1e6);

    // ---- 4. Training ---------------------------------------------------------------------------
    // Batches: pairs of similar length together, up to batch_tokens padded tokens. The
    // schedule is fixed by the seed, so a resumed run sees the batches the first one would have.
    std::vector<int64_t> lengths;
    for (size_t i = 0; i < train_pairs.source.size(); ++i) {
      lengths.push_back(static_cast<int64_t>(std::max(train_pairs.source[i].size(), train_pairs.target[i].size())));
    }
    // Under mpirun each rank takes its share of every batch.
    auto schedule =
        datasets::DistributedSampler(datasets::BatchSchedule::bucketed(lengths, {.max_tokens = recipe.batch_tokens}, common.seed),
                                     distributed::rank(), distributed::world_size());
    const int64_t batches_per_epoch = schedule.batches_in_epoch(0);

    // Weight decay on the matrices only (weight_decay_groups leaves biases and LayerNorms alone).
    nn::AdamW optimizer(nn::weight_decay_groups(*model, recipe.weight_decay), {.lr = recipe.lr, .betas = {0.9, 0.98}});
    // The warm-up does not depend on the total step count, so the first steps can run before
    // the total is known, and the schedule made again once it is.
    auto make_schedule = [&](int64_t total) {
      return std::make_shared<nn::WarmupLinear>(recipe.lr, recipe.warmup_steps, std::max(total, recipe.warmup_steps + 1));
    };

    std::optional<int64_t> resumed_step;
    if (total_steps == 0 && recipe.epochs > 0) {
      for (int64_t epoch = 0; epoch < recipe.epochs; ++epoch) total_steps += schedule.batches_in_epoch(epoch);
    }
    auto scheduler = std::make_unique<nn::Scheduler>(optimizer, make_schedule(total_steps));
    // --precision fp16 scales the loss; the scale is saved with the checkpoints.
    const train::Precision precision = common.precision_choice();
    nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});
    if (resuming) {
      std::string found;
      resumed_step = train::resume_from(checkpoint_path, *model, optimizer, scheduler.get(), &found, &scaler);
      fmt::print("--resume: {}\n", found);
    }
    // Planned or not yet, the schedule is paced by the budget: should the steps turn out slower
    // than planned, it ends with the time rather than at the planned step.
    budget.pace(*scheduler, total_steps);

    // The step itself: forward, loss, backward, clipping, AdamW. On a GPU the step of each batch
    // shape is captured once as a CUDA graph and replayed after (nn/train/graphed_steps.h); the
    // sentences are then padded to a multiple of 8 tokens (which divides kMaxPositions), so the
    // buckets make a few shapes. The schedule runs outside it: a replay reads the rate it set.
    // Under mpirun the gradients are averaged over the ranks during backward (before the
    // clipping), and a step is not captured as a graph (the averaging waits on the host). With
    // --precision bf16 or fp16 the forward pass and the loss run under autocast; fp16 also
    // scales the loss, and the gradients are unscaled before they are clipped.
    std::optional<nn::DistributedDataParallel> data_parallel;
    if (distributed::world_size() > 1) data_parallel.emplace(*model);
    const bool graphs = !data_parallel && examples::cuda_graphs_apply(common, device);
    const int64_t length_multiple = graphs ? std::gcd<int64_t>(8, kMaxPositions) : 1;
    train::GraphedSteps forward_backward_update(
        [&](std::span<const Tensor> batch) {  // source, target
          const Tensor& source = batch[0];
          const Tensor& target = batch[1];
          const int64_t length = target.size(1) - 1;
          optimizer.zero_grad();
          const Tensor labels = target.narrow(1, 1, length).contiguous();
          Tensor loss;
          {
            const AutocastGuard autocast = train::autocast_scope(precision, device.type);
            const Tensor logits = model->forward(source, target.narrow(1, 0, length));
            loss = nn::cross_entropy(logits, labels,
                                     {.ignore_index = pad_id, .label_smoothing = recipe.label_smoothing});
          }
          scaler.scale(loss).backward();
          scaler.unscale_(optimizer);
          nn::clip_grad_norm_(model->parameters(), 1.0);
          scaler.step(optimizer);
          scaler.update();
          return loss;
        },
        {.enabled = graphs});

    // One training step on the batch at `step` (1-based); returns the loss and the tokens seen.
    auto train_step = [&](int64_t step) {
      const std::vector<int64_t> indices = schedule.batch(step - 1);
      const Tensor source =
          datasets::pad_batch(datasets::take(train_pairs.source, indices), pad_id, -1, length_multiple).ids.to(device);
      const Tensor target =
          datasets::pad_batch(datasets::take(train_pairs.target, indices), pad_id, -1, length_multiple).ids.to(device);
      const Tensor loss = forward_backward_update({source, target});
      budget.step_done();  // the schedule's next step, or further if the time runs short
      int64_t tokens = 0;
      for (const int64_t index : indices) {
        tokens += static_cast<int64_t>(train_pairs.source[index].size() + train_pairs.target[index].size());
      }
      return std::pair<double, int64_t>{loss.item(), tokens};
    };

    int64_t step = resumed_step.value_or(0);
    double loss_sum = 0;
    int64_t loss_count = 0;
    if (total_steps == 0) {
      // Plan from the budget: run a few steps (inside the warm-up, where the rate does not
      // depend on the total), time them, and fit as many steps as the rest of the budget holds,
      // less a share for the evaluations along the way. The typical step is the median: the
      // first steps allocate, and with CUDA graphs the first two steps of each batch shape (op
      // by op, then captured) are slower than the replays that make up the rest of the run, so
      // the probe is longer there, long enough for replays to be most of it.
      const int64_t probe_steps = std::min<int64_t>(graphs ? 100 : 30, recipe.warmup_steps);
      const int64_t skipped = 3;
      fmt::print("\n4. training: measuring the step time over {} steps...\n", probe_steps);
      std::fflush(stdout);
      while (step < probe_steps) {
        const auto [loss, tokens] = train_step(++step);
        loss_sum += loss;
        ++loss_count;
      }
      const double step_seconds = budget.steps_done() > skipped ? budget.median_step_seconds(skipped) : 1.0;
      // 5% of the time left for the evaluations along the way; every rank runs rank 0's plan.
      const double evaluation_share = 0.05;
      total_steps = step + budget.steps_that_fit(step_seconds / (1 - evaluation_share));
      fmt::print("   {:.3f} s per step: {} steps fit in the budget ({:.1f} epochs of {} batches); --steps {} "
                 "repeats this run\n",
                 step_seconds, total_steps, static_cast<double>(total_steps) / static_cast<double>(batches_per_epoch),
                 batches_per_epoch, total_steps);
      scheduler = std::make_unique<nn::Scheduler>(optimizer, make_schedule(total_steps));
      for (int64_t s = 0; s < step; ++s) scheduler->step();
      budget.pace(*scheduler, total_steps);
    } else {
      fmt::print("\n4. training: {} steps ({:.1f} epochs of {} batches){}\n", total_steps,
                 static_cast<double>(total_steps) / static_cast<double>(batches_per_epoch), batches_per_epoch,
                 resumed_step ? fmt::format(", resuming after step {}", *resumed_step) : "");
    }
    if (!resuming && examples::is_main_process()) {
      nlohmann::json config = recipe.to_json();
      config["total_steps"] = total_steps;
      config["seed"] = common.seed;
      nn::write_file_atomically(config_path, config.dump(2) + "\n");
    }
    if (eval_every == 0) eval_every = std::max<int64_t>(1, total_steps / 10);

    // Evaluation along the way: the test loss, and BLEU of greedy translations of a fixed,
    // evenly spread part of the test split (translating all of it is left for the end).
    std::vector<int64_t> eval_indices;
    const int64_t eval_count = std::min<int64_t>(eval_sentences, static_cast<int64_t>(test_pairs.source.size()));
    for (int64_t i = 0; i < eval_count; ++i) {
      eval_indices.push_back(i * static_cast<int64_t>(test_pairs.source.size()) / eval_count);
    }
    const EncodedPairs eval_pairs = subset(test_pairs, eval_indices);
    const std::vector<int64_t> shown = {1, eval_count / 2, eval_count - 2};  // the sentences printed each time

    train::CheckpointSaver saver(checkpoint_path, eval_every, *model, optimizer, scheduler.get(), &scaler);
    train::MetricsLog log(common.out_path("metrics.csv"), {"train_loss", "test_loss", "bleu_greedy", "lr", "elapsed_s"},
                          resumed_step);
    train::ProgressBar progress(total_steps, {.label = "train", .unit = "tok"}, step);
    const auto loop_start = Clock::now();
    while (!budget.finished()) {
      const auto [loss, tokens] = train_step(++step);
      loss_sum += loss;
      ++loss_count;
      progress.update(step, {{"loss", loss}, {"lr", optimizer.lr(0)}},
                      static_cast<double>(tokens * distributed::world_size()));
      if (step % eval_every == 0 || budget.finished()) {
        const auto eval_start = Clock::now();
        const double loss_test = test_loss(*model, test_pairs, pad_id, device);
        const std::vector<std::string> outputs = translate_all(*model, tokenizer, eval_pairs.source, 1, 1.0, device);
        const train::BleuScore score = bleu(outputs, eval_pairs.english);
        const double lr = optimizer.lr(0);
        log.write(step, {{"train_loss", loss_sum / static_cast<double>(loss_count)},
                         {"test_loss", loss_test},
                         {"bleu_greedy", score.score},
                         {"lr", lr},
                         {"elapsed_s", seconds_since(program_start)}});
        progress.print_line(fmt::format(
            "step {} (epoch {:.1f}): train loss {:.3f}, test loss {:.3f}, greedy BLEU {:.2f} on {} test sentences "
            "({:.1f} s)",
            step, static_cast<double>(step) / static_cast<double>(batches_per_epoch),
            loss_sum / static_cast<double>(loss_count), loss_test, score.score, eval_count, seconds_since(eval_start)));
        print_translations(eval_pairs, outputs, shown, "greedy");
        loss_sum = 0;
        loss_count = 0;
        saver.save(step);
      }
    }
    progress.finish();
    const double training_seconds = seconds_since(program_start);
    if (budget.out_of_time() && step < total_steps) {
      fmt::print("   the time budget ran out at step {} of {}; the learning rate's schedule was paced to end with it\n",
                 step, total_steps);
    }
    fmt::print("   trained {} steps in {} ({} since the start, the budget {})\n", step,
               train::format_duration(seconds_since(loop_start)), train::format_duration(training_seconds),
               train::format_duration(budget.budget_seconds()));
    train::plot_metrics_csv(log.path(), "translation DE-EN");
    if (!examples::is_main_process()) return;  // rank 0 saves and evaluates the model
    nn::save(*model, common.out_path("model.safetensors"));

    // ---- 5. Evaluation on the whole test split ---------------------------------------------
    fmt::print("\n5. test split, {} sentences\n", test_pairs.source.size());
    const auto greedy_start = Clock::now();
    const std::vector<std::string> greedy = translate_all(*model, tokenizer, test_pairs.source, 1, 1.0, device);
    const double greedy_seconds = seconds_since(greedy_start);
    const auto beam_start = Clock::now();
    const std::vector<std::string> beam =
        translate_all(*model, tokenizer, test_pairs.source, beam_size, length_penalty, device);
    const double beam_seconds = seconds_since(beam_start);
    fmt::print("   greedy:  {}  ({:.1f} s)\n", bleu(greedy, test_pairs.english).summary(), greedy_seconds);
    fmt::print("   beam {}:  {}  ({:.1f} s)\n", beam_size, bleu(beam, test_pairs.english).summary(), beam_seconds);
    for (const int64_t i : {10, 300, 600}) {
      fmt::print("    German:    {}\n    reference: {}\n    greedy:    {}\n    beam {}:    {}\n", test_pairs.german[i],
                 test_pairs.english[i], greedy[i], beam_size, beam[i]);
    }
    std::string table = "german\treference\tgreedy\tbeam\n";
    for (size_t i = 0; i < greedy.size(); ++i) {
      table += fmt::format("{}\t{}\t{}\t{}\n", test_pairs.german[i], test_pairs.english[i], greedy[i], beam[i]);
    }
    nn::write_file_atomically(common.out_path("test_translations.tsv"), table);
  });
}
