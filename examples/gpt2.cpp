// Worked example 10, "GPT-2": the model of nanoGPT and llm.c, in ember. It trains GPT-2 from
// scratch on plain text with GPT-2's own tokenizer, prints held-out loss, perplexity and samples
// as it learns, and generates text from what it trained or from any GPT-2 checkpoint folder in
// Hugging Face's layout (such as the published `gpt2`).
//
//   ./build/examples/gpt2                                          # the cpu preset, --minutes 20
//   ./build/examples/gpt2 --text a.txt b.txt --minutes 5           # your own text files
//   ./build/examples/gpt2 --generate --prompt "The state of the Union is"
//   ./build/examples/gpt2 --generate --init-from models/gpt2 --prompt "Hello" --top-p 0.9
//   mpirun -np 2 ./build/examples/gpt2 --threads 1                 # data parallel
//
// The text is the State of the Union addresses and Moby Dick (bash scripts/fetch_data.sh sotu
// moby-dick gpt2-vocab). Read it top to bottom: the recipe and its presets, the documents and
// their split, tokens, the model, evaluation and samples, the training loop, and generation.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/config_values.h"
#include "common/options.h"
#include "common/run_main.h"
#include "common/token_windows.h"
#include "ember.h"
#include "nn/data/datasets.h"
#include "nn/io/regular_file.h"
#include "nn/text/text.h"
#include "nn/train/train.h"

using namespace ember;

namespace {

// ---- The recipe ------------------------------------------------------------------------------
//
// Every size and rate that shapes a run, with two presets. `cpu` is GPT-2's architecture at a
// size that learns visibly in 20 minutes on two cores. With GPT-2's 50,257-token vocabulary the
// output layer is most of the work: 50,257 x width multiply-adds per token, against
// 12 x width^2 per block. At width 256 that is 12.9M against 0.8M, so blocks are cheap (six
// cost 5% of the head more than four would) and the width is what the time buys: measured on two
// cores, products are 86% of a step and the output layer's are 80% of those
// (benchmarks/side_by_side, workload gpt). A context of 128 tokens holds a paragraph. `124M` is
// GPT-2 small exactly.
struct Recipe {
  int64_t n_layer = 6;
  int64_t n_head = 4;
  int64_t n_embd = 256;
  int64_t context = 128;  // tokens the model reads (its n_positions)
  double dropout = 0.0;   // the three dropouts of GPT-2's config; off for a run this short
  int64_t batch = 16;     // windows of context + 1 tokens per step (per process under mpirun)
  double lr = 2e-3;       // high, for a run of a few hundred steps
  int64_t warmup = 50;    // steps of linear warmup, then a cosine decay to lr / 10
  double weight_decay = 0.1;
  double clip = 1.0;      // the gradients' total norm is clipped to it
};

Recipe preset(const std::string& name) {
  if (name == "124M") {
    return {.n_layer = 12, .n_head = 12, .n_embd = 768, .context = 1024, .dropout = 0.0, .batch = 8, .lr = 6e-4,
            .warmup = 200};
  }
  return {};  // "cpu"
}

nn::GPT2Config model_config(const Recipe& recipe) {
  nn::GPT2Config config;
  config.n_layer = recipe.n_layer;
  config.n_head = recipe.n_head;
  config.n_embd = recipe.n_embd;
  config.n_positions = recipe.context;
  config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = recipe.dropout;
  config.check();
  return config;
}

// ---- The documents and their split -------------------------------------------------------------
//
// The held-out text is made of whole documents, so that no held-out sentence has a neighbour
// in training. The default text holds out the addresses of years divisible by 10 (DATA.md) and
// trains on the other addresses and on all of Moby Dick; files given with --text hold out every
// tenth file (the last one when there are fewer than ten), or a single file's last tenth.
struct Corpus {
  std::vector<std::string> train, held_out;
  std::string description;
};

std::string read_text_file(const std::string& path) {
  check_regular_file(path, "--text");
  std::ifstream file(path, std::ios::binary);
  EMBER_CHECK(file, "--text: cannot open {}", path);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EMBER_CHECK(!text.empty(), "--text: {} is empty", path);
  return text;
}

Corpus load_corpus(const std::vector<std::string>& files, const std::string& data_dir) {
  Corpus corpus;
  if (files.empty()) {
    const datasets::SotuData sotu = datasets::load_sotu(data_dir);
    for (const auto& address : sotu.train) corpus.train.push_back(address.text);
    for (const auto& address : sotu.held_out) corpus.held_out.push_back(address.text);
    const datasets::TextSplit book = datasets::load_moby_dick(data_dir);
    corpus.train.push_back(book.train + book.validation);
    corpus.description = fmt::format("{} State of the Union addresses and Moby Dick; held out: the {} addresses of "
                                     "years divisible by 10", sotu.train.size() + sotu.held_out.size(),
                                     sotu.held_out.size());
    return corpus;
  }
  if (files.size() == 1) {
    const std::string text = read_text_file(files[0]);
    const size_t cut = text.size() - text.size() / 10;
    corpus.train.push_back(text.substr(0, cut));
    corpus.held_out.push_back(text.substr(cut));
    corpus.description = fmt::format("{}; held out: its last tenth", files[0]);
    return corpus;
  }
  const size_t every = std::min<size_t>(10, files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    (i % every == every - 1 ? corpus.held_out : corpus.train).push_back(read_text_file(files[i]));
  }
  corpus.description =
      every < 10 ? fmt::format("{} files; held out: the last one", files.size())
                 : fmt::format("{} files; held out: every 10th ({} of them)", files.size(), corpus.held_out.size());
  return corpus;
}

// GPT-2 reads a stream of tokens in which documents follow one another, each ended by
// <|endoftext|>: the model learns where a document stops, and what follows the marker is new.
std::vector<int64_t> token_stream(const text::Gpt2Tokenizer& tokenizer, const std::vector<std::string>& documents) {
  std::vector<int64_t> ids;
  for (const std::string& document : documents) {
    const std::vector<int64_t> piece = tokenizer.encode(document);
    ids.insert(ids.end(), piece.begin(), piece.end());
    ids.push_back(tokenizer.end_of_text_id());
  }
  return ids;
}

text::Gpt2Tokenizer load_tokenizer(const std::string& data_dir) {
  const std::string folder = (std::filesystem::path(data_dir) / "gpt2-vocab").string();
  EMBER_CHECK(std::filesystem::exists(folder + "/encoder.json") && std::filesystem::exists(folder + "/vocab.bpe"),
              "GPT-2's tokenizer files are missing from {}/: run bash scripts/fetch_data.sh gpt2-vocab", folder);
  return text::Gpt2Tokenizer::load(folder + "/encoder.json", folder + "/vocab.bpe");
}

double peak_memory_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// ---- Evaluation and samples --------------------------------------------------------------------
//
// The held-out loss in nats per token, in eval mode and without recording. Perplexity is its
// exponential: the number of tokens the model is, on average, as unsure between as a fair die
// with that many faces. Scoring all the held-out text (189k tokens by default) would take
// minutes on two cores, so at most `max_tokens` are scored (--eval-tokens), and spread over the
// whole of it: stretches of 8 contexts at even intervals, the same ones at every evaluation so
// that the figures compare. A prefix instead would score the addresses of 1790 to 1840 only.
// Within a stretch the tokens are scored as validation_windows scores a text, but its first
// context / 2 tokens are history only: every scored token has at least context / 2 tokens
// before it, as in the whole text.
examples::ValidationWindows held_out_windows(const std::vector<int64_t>& ids, int64_t max_tokens, int64_t context) {
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t stretch = std::max(context + 1, std::min(8 * context, max_tokens));
  if (max_tokens == 0 || n <= max_tokens || n <= stretch) return examples::validation_windows(ids, context);
  const int64_t count = std::max<int64_t>(1, max_tokens / stretch);
  std::vector<Tensor> inputs, targets;
  int64_t scored = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t start = count == 1 ? 0 : (n - stretch) * i / (count - 1);
    examples::ValidationWindows piece =
        examples::validation_windows({ids.begin() + start, ids.begin() + start + stretch}, context);
    // The first window scores all its positions; keep the first half as history.
    piece.targets.narrow(0, 0, 1).narrow(1, 0, context / 2).fill_(kIgnoreIndex);
    inputs.push_back(piece.inputs);
    targets.push_back(piece.targets);
    scored += piece.scored - context / 2;
  }
  return {cat(inputs, 0), cat(targets, 0), scored};
}

// Under mpirun each process scores every ranks-th batch of windows, and the sums are added up.
double held_out_loss(nn::GPT2LMHeadModel& model, const examples::ValidationWindows& windows, int64_t batch,
                     Device device) {
  NoGradGuard no_grad;
  const nn::EvalModeScope eval_mode(model);
  const int64_t rank = distributed::rank(), ranks = distributed::world_size();
  double total = 0;
  const int64_t count = windows.inputs.size(0);
  for (int64_t first = rank * batch; first < count; first += ranks * batch) {
    const int64_t rows = std::min(batch, count - first);
    const Tensor loss = model.loss(windows.inputs.narrow(0, first, rows).to(device),
                                   windows.targets.narrow(0, first, rows).to(device), {.reduction = Reduction::Sum});
    total += loss.item<double>();
  }
  return train::sum_over_ranks({total})[0] / static_cast<double>(windows.scored);
}

struct SampleRequest {
  std::string prompt = "The state of the Union";
  int64_t max_new_tokens = 60;
  nn::SamplingOptions sampling = {.temperature = 0.8, .top_k = 40, .top_p = 1.0};
};

std::vector<int64_t> encode_prompt(const text::Gpt2Tokenizer& tokenizer, const std::string& prompt) {
  EMBER_CHECK(!prompt.empty(), "the prompt is empty: give the text to continue, e.g. --prompt \"Call me Ishmael\"");
  return tokenizer.encode(prompt);
}

// What the model wrote, as text to print. GPT-2's tokens are bytes, and a sample may stop (or,
// early in training, wander) in the middle of a character: malformed bytes are shown as U+FFFD.
// The end of a document, which decode() leaves out, is shown as <|endoftext|>.
std::string printable(const text::Gpt2Tokenizer& tokenizer, const Tensor& ids) {
  std::string text;
  std::vector<int64_t> document;
  for (const int64_t id : ids.to(Device::cpu()).to_vector<int64_t>()) {
    if (id != tokenizer.end_of_text_id()) {
      document.push_back(id);
      continue;
    }
    text += tokenizer.decode(document) + text::Gpt2Tokenizer::kEndOfText;
    document.clear();
  }
  return text::to_valid_utf8(text + tokenizer.decode(document));
}

// Continues the prompt. The draws use their own seed and leave the global generator where it
// was, so sampling during training changes nothing in the training run.
std::string sample_text(nn::GPT2LMHeadModel& model, const text::Gpt2Tokenizer& tokenizer,
                        const SampleRequest& request, uint64_t seed, Device device) {
  const std::vector<int64_t> prompt = encode_prompt(tokenizer, request.prompt);
  const PhiloxState saved = Generator::global().state();
  manual_seed(seed);
  const Tensor ids = model.generate(tensor(prompt, {static_cast<int64_t>(prompt.size())}).to(device),
                                    request.max_new_tokens, request.sampling);
  Generator::global().set_state(saved);
  return printable(tokenizer, ids);
}

std::string indented(const std::string& text) {
  std::string out = "    | ";
  for (char c : text) out += c == '\n' ? std::string("\n    | ") : std::string(1, c);
  return out;
}

// ---- Generation: --generate ----------------------------------------------------------------------
//
// Loads a checkpoint folder in Hugging Face's layout (config.json + model.safetensors): the one
// a training run saved (--out/model), or any GPT-2 (--init-from), and continues the prompt,
// timing the whole generate() call: the prompt read once, then one position per new token.
void check_checkpoint_folder(const std::string& folder, const std::string& option) {
  for (const char* file : {"config.json", "model.safetensors"}) {
    EMBER_CHECK(std::filesystem::exists(std::filesystem::path(folder) / file),
                "{}: {}/ has no {}; give a GPT-2 checkpoint folder in Hugging Face's layout "
                "(config.json + model.safetensors), such as one a run of this example saved in --out/model",
                option, folder, file);
  }
}

// A checkpoint must know every id GPT-2's tokenizer writes (it may know more: some pad the
// vocabulary to a round size).
void check_vocabulary(const nn::GPT2Config& config, const text::Gpt2Tokenizer& tokenizer, const std::string& folder) {
  EMBER_CHECK(config.vocab_size >= tokenizer.vocab_size(),
              "{}: the model has a vocabulary of {} tokens, fewer than the {} of GPT-2's tokenizer", folder,
              config.vocab_size, tokenizer.vocab_size());
}

void generate(const examples::CommonOptions& common, const std::string& init_from, const SampleRequest& request) {
  const Device device = examples::setup_run(common);
  const std::string folder = init_from.empty() ? common.out_path("model") : init_from;
  if (init_from.empty()) {
    EMBER_CHECK(std::filesystem::exists(folder + "/config.json"),
                "--generate: no model in {}/ (config.json is missing); train one first with ./build/examples/gpt2 "
                "--out {}, or give a GPT-2 checkpoint folder with --init-from", folder, common.out_dir);
  }
  check_checkpoint_folder(folder, init_from.empty() ? "--generate" : "--init-from");
  const text::Gpt2Tokenizer tokenizer = load_tokenizer(common.data_dir);
  const std::vector<int64_t> prompt = encode_prompt(tokenizer, request.prompt);
  auto model = nn::GPT2LMHeadModel::from_pretrained(folder);
  model->to(device);
  const nn::GPT2Config& config = model->config();
  check_vocabulary(config, tokenizer, folder);
  fmt::print("model: {}/, GPT-2 with {} layers, {} heads, width {}, context {}: {:.1f}M parameters\n", folder,
             config.n_layer, config.n_head, config.n_embd, config.n_positions,
             static_cast<double>(model->num_parameters()) / 1e6);
  const auto start = std::chrono::steady_clock::now();
  const Tensor ids = model->generate(tensor(prompt, {static_cast<int64_t>(prompt.size())}).to(device),
                                     request.max_new_tokens, request.sampling);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  fmt::print("\n{}\n\n", printable(tokenizer, ids));
  fmt::print("prompt {} tokens, {} new tokens in {:.0f} ms ({:.1f} ms per token, KV cache); peak memory {:.0f} MB\n",
             prompt.size(), request.max_new_tokens, ms,
             ms / static_cast<double>(std::max<int64_t>(1, request.max_new_tokens)), peak_memory_mb());
}

// ---- Training ------------------------------------------------------------------------------------

struct TrainingRequest {
  Recipe recipe;
  std::vector<std::string> text_files;
  std::string init_from;  // a checkpoint to start from instead of random weights
  double minutes = 20;
  int64_t steps = 0;            // 0: as many as fit in --minutes
  int64_t eval_every = 100;     // evaluate, print a sample and save a checkpoint every this many steps
  int64_t eval_tokens = 16384;  // held-out tokens scored at each evaluation (0: all)
  SampleRequest sample;
};

// run.json, the run's record: the recipe, the seed, where the weights started and the text (a
// resumed run must continue with the same ones, or it would be neither run), the planned step
// count (which --resume takes up), and at the end what the run reached.
nlohmann::json run_record(const Recipe& recipe, const TrainingRequest& request, uint64_t seed) {
  return {{"n_layer", recipe.n_layer}, {"n_head", recipe.n_head},     {"n_embd", recipe.n_embd},
          {"context", recipe.context}, {"dropout", recipe.dropout},   {"batch", recipe.batch},
          {"lr", recipe.lr},           {"warmup", recipe.warmup},     {"weight_decay", recipe.weight_decay},
          {"clip", recipe.clip},       {"seed", seed},                {"init_from", request.init_from},
          {"text", request.text_files}, {"eval_tokens", request.eval_tokens}};
}

std::optional<nlohmann::json> read_json(const std::string& path) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  std::ifstream file(path);
  try {
    return nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not valid JSON ({})", path, error.what());
  }
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void train_model(const examples::CommonOptions& common, const TrainingRequest& request) {
  Recipe recipe = request.recipe;
  const Device device = examples::setup_run(common);
  const int64_t rank = distributed::rank(), ranks = distributed::world_size();
  if (!request.init_from.empty()) check_checkpoint_folder(request.init_from, "--init-from");

  // Stage 1: the documents and their tokens. GPT-2's byte-level BPE writes any text; the
  // tokenizer keeps a cache of the words it has encoded, so the whole text takes seconds.
  const Corpus corpus = load_corpus(request.text_files, common.data_dir);
  const text::Gpt2Tokenizer tokenizer = load_tokenizer(common.data_dir);
  const Clock::time_point tokenize_start = Clock::now();
  const std::vector<int64_t> train_ids = token_stream(tokenizer, corpus.train);
  const std::vector<int64_t> held_out_ids = token_stream(tokenizer, corpus.held_out);
  fmt::print("text: {}\ntokens: {} for training, {} held out ({:.1f} s to tokenize)\n", corpus.description,
             train_ids.size(), held_out_ids.size(), seconds_since(tokenize_start));

  // Stage 2: the model. Random weights in GPT-2's initialisation, or a checkpoint's (whose
  // config then decides the sizes and dropout; the context may be shortened, not lengthened).
  std::shared_ptr<nn::GPT2LMHeadModel> model;
  if (!request.init_from.empty()) {
    model = nn::GPT2LMHeadModel::from_pretrained(request.init_from);
    const nn::GPT2Config& loaded = model->config();
    EMBER_CHECK(recipe.context <= loaded.n_positions, "--context {}: {} has positions for {} tokens only",
                recipe.context, request.init_from, loaded.n_positions);
    check_vocabulary(loaded, tokenizer, request.init_from);
    recipe.n_layer = loaded.n_layer;
    recipe.n_head = loaded.n_head;
    recipe.n_embd = loaded.n_embd;
    recipe.dropout = loaded.resid_pdrop;
  } else {
    model = std::make_shared<nn::GPT2LMHeadModel>(model_config(recipe));
  }
  model->to(device);
  fmt::print("model: GPT-2, {} layers, {} heads, width {}, context {}: {:.1f}M parameters\n", recipe.n_layer,
             recipe.n_head, recipe.n_embd, recipe.context, static_cast<double>(model->num_parameters()) / 1e6);

  // Stage 3: the optimizer: AdamW with GPT-2's betas, decaying the matrices only.
  nn::AdamW optimizer(nn::weight_decay_groups(*model, recipe.weight_decay),
                      {.lr = recipe.lr, .betas = {0.9, 0.95}});
  const train::Precision precision = common.precision_choice();
  nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});

  // Stage 4: evaluation: the held-out loss and a sample, timed (the plan needs the time).
  const examples::ValidationWindows held_out = held_out_windows(held_out_ids, request.eval_tokens, recipe.context);
  fmt::print("evaluation: {} held-out tokens scored, in {} windows of {}\n", held_out.scored,
             held_out.inputs.size(0), recipe.context);
  // Batches of about 8k tokens: larger ones only cost memory.
  const int64_t eval_batch = std::max<int64_t>(1, 8192 / recipe.context);
  const uint64_t sample_seed = common.seed + 1;
  double eval_seconds = 0;  // the last evaluation's
  auto evaluate = [&] {
    const Clock::time_point start = Clock::now();
    const double loss = held_out_loss(*model, held_out, eval_batch, device);
    std::string sample = sample_text(*model, tokenizer, request.sample, sample_seed, device);
    eval_seconds = seconds_since(start);
    return std::pair{loss, std::move(sample)};
  };
  auto report = [&](int64_t step, double loss, const std::string& sample) {
    return fmt::format("step {}: held-out loss {:.3f} nats/token, perplexity {:.1f} ({:.1f} s with the sample)\n{}",
                       step, loss, std::exp(loss), eval_seconds, indented(sample));
  };

  // Stage 5: the plan. The run lasts `steps` steps, and the learning rate decays to its floor
  // at the last one. --steps fixes it; a resumed run takes the plan of the run it continues
  // (run.json); otherwise it is measured: the first steps, at the warmup's rates (which do not
  // depend on the total), give the time of a step, and the count that fills --minutes follows.
  // Should the steps turn out slower than planned, the schedule is paced to end with the time.
  const std::string checkpoint_path = common.out_path("checkpoint.safetensors");
  const std::string run_path = common.out_path("run.json");
  nlohmann::json record = run_record(recipe, request, common.seed);
  int64_t total_steps = request.steps;
  if (common.resume) {
    if (const auto saved = read_json(run_path); saved && std::filesystem::exists(checkpoint_path)) {
      std::vector<std::string> differences;
      for (const auto& [key, value] : record.items()) {
        if (saved->contains(key) && (*saved)[key] != value) {
          differences.push_back(fmt::format("{} {} (now {})", key, (*saved)[key].dump(), value.dump()));
        }
      }
      EMBER_CHECK(differences.empty(),
                  "--resume: the run in {}/ was trained with another recipe: {}; resume with its options, or start "
                  "afresh without --resume",
                  common.out_dir, fmt::join(differences, ", "));
      if (saved->contains("steps")) {  // absent when the run stopped before its plan was made
        const int64_t planned = examples::config_integer(*saved, "steps", run_path);
        if (total_steps == 0) total_steps = planned;
        EMBER_CHECK(total_steps == planned, "--resume: the run in {}/ planned {} steps, not --steps {}",
                    common.out_dir, planned, total_steps);
      }
    }
  }
  auto write_record = [&] {
    if (examples::is_main_process()) nn::write_file_atomically(run_path, record.dump(2) + "\n");
  };
  auto make_scheduler = [&](int64_t steps) {
    return std::make_unique<nn::Scheduler>(
        optimizer, std::make_shared<nn::WarmupCosine>(recipe.lr, std::min(recipe.warmup, steps), steps, recipe.lr / 10));
  };
  std::unique_ptr<nn::Scheduler> scheduler =
      make_scheduler(total_steps > 0 ? total_steps : std::numeric_limits<int32_t>::max());
  train::TimeBudget budget({.seconds = request.minutes * 60});
  int64_t step = 0;
  if (common.resume) {
    std::string found;
    if (auto resumed = train::resume_from(checkpoint_path, *model, optimizer, scheduler.get(), &found, &scaler)) {
      step = *resumed;
    }
    fmt::print("--resume: {}\n", found);
  }
  budget.pace(*scheduler, total_steps);

  // Stage 6: the loop. One step: forward, the chunked loss, backward, clip, AdamW; under mpirun
  // each process reads its own windows and the gradients are averaged during backward.
  std::optional<nn::DistributedDataParallel> data_parallel;
  if (ranks > 1) data_parallel.emplace(*model);
  train::GraphedSteps train_step(
      [&](std::span<const Tensor> batch) {
        optimizer.zero_grad();
        Tensor loss;
        {
          const AutocastGuard autocast = train::autocast_scope(precision, device.type);
          loss = model->loss(batch[0], batch[1]);
        }
        scaler.scale(loss).backward();
        scaler.unscale_(optimizer);
        nn::clip_grad_norm_(model->parameters(), recipe.clip);
        scaler.step(optimizer);
        scaler.update();
        return loss;
      },
      {.enabled = !data_parallel && examples::cuda_graphs_apply(common, device)});

  train::MetricsLog log(common.out_path("metrics.csv"), {"train_loss", "val_loss", "perplexity", "lr", "tokens_per_s"},
                        step > 0 ? std::optional<int64_t>(step) : std::nullopt);
  if (step == 0) {
    const auto [loss, sample] = evaluate();
    log.write(0, {{"val_loss", loss}, {"perplexity", std::exp(loss)}});
    fmt::print("{}\n", report(0, loss, sample));
  }
  // Rebuilt with the scheduler when the plan replaces it.
  std::optional<train::CheckpointSaver> saver;
  saver.emplace(checkpoint_path, request.eval_every, *model, optimizer, scheduler.get(), &scaler);
  const int64_t tokens_per_step = recipe.batch * recipe.context * ranks;
  constexpr int64_t kPlanningSteps = 20, kUntimedSteps = 5;
  auto plan = [&] {
    // Time left, less a 3% margin and the last evaluation, shared between steps and one
    // evaluation every eval_every steps.
    const double step_seconds = budget.median_step_seconds(kUntimedSteps);  // the first steps warm the allocator
    total_steps = step + std::max<int64_t>(1, budget.steps_that_fit(step_seconds + eval_seconds / request.eval_every,
                                                                    0.03 * budget.budget_seconds() + eval_seconds));
    fmt::print("plan: {:.0f} ms per step, {:.1f} s per evaluation -> {} steps in {:g} minutes (--steps {} repeats "
               "this run)\n", 1000 * step_seconds, eval_seconds, total_steps, request.minutes, total_steps);
    const nn::StateDict schedule_state = scheduler->state_dict();
    scheduler = make_scheduler(total_steps);
    scheduler->load_state_dict(schedule_state);
    budget.pace(*scheduler, total_steps);
    saver.emplace(checkpoint_path, request.eval_every, *model, optimizer, scheduler.get(), &scaler);
  };
  if (total_steps > 0) record["steps"] = total_steps;
  write_record();
  // Shown once the plan knows the total: the first steps of a timed run are the plan's.
  std::optional<train::ProgressBar> progress;
  const auto show_progress = [&] {
    progress.emplace(total_steps, train::ProgressBarOptions{.label = "train", .unit = "tokens"}, step);
  };
  if (total_steps > 0) {
    show_progress();
  } else {
    fmt::print("planning: timing the first {} steps\n", kPlanningSteps);
  }
  double loss_sum = 0, val_loss = std::nan("");
  int64_t loss_count = 0;
  Clock::time_point window_start = Clock::now();
  int64_t window_steps = 0;
  while (!budget.finished()) {
    ++step;
    const Tensor windows = examples::random_windows(train_ids, step - 1, recipe.batch, recipe.context + 1,
                                                    common.seed, device, rank, ranks);
    const Tensor loss = train_step({windows.slice(1, std::nullopt, -1).contiguous(),
                                    windows.slice(1, 1, std::nullopt).contiguous()});
    budget.step_done();
    // Counted in this process's steps, so that a run resumed before its plan also times enough.
    if (total_steps == 0 && budget.steps_done() == kPlanningSteps) {
      plan();
      record["steps"] = total_steps;
      write_record();
      show_progress();
    }
    loss_sum += loss.item<double>();
    ++loss_count;
    ++window_steps;
    if (progress) {
      progress->update(step, {{"loss", loss_sum / static_cast<double>(loss_count)}, {"lr", optimizer.lr(0)}},
                       static_cast<double>(tokens_per_step));
    }
    const bool evaluate_now = step % request.eval_every == 0 || budget.finished();
    if (!evaluate_now) continue;
    const double seconds = seconds_since(window_start);
    const auto [loss_now, sample] = evaluate();
    val_loss = loss_now;
    if (progress) {
      progress->print_line(report(step, val_loss, sample));
    } else {
      fmt::print("{}\n", report(step, val_loss, sample));
    }
    log.write(step, {{"train_loss", loss_sum / static_cast<double>(loss_count)},
                     {"val_loss", val_loss},
                     {"perplexity", std::exp(val_loss)},
                     {"lr", optimizer.lr(0)},
                     {"tokens_per_s", static_cast<double>(window_steps * tokens_per_step) / seconds}});
    saver->save(step);
    loss_sum = 0;
    loss_count = 0;
    window_steps = 0;
    window_start = Clock::now();
  }
  if (progress) progress->finish();
  // A run resumed from its last checkpoint has no step left to take: score what it saved.
  if (std::isnan(val_loss)) val_loss = held_out_loss(*model, held_out, eval_batch, device);
  if (budget.out_of_time() && step < total_steps) {
    fmt::print("the {}-minute budget ran out at step {} of {}; the learning rate's schedule was paced to end with "
               "it\n", request.minutes, step, total_steps);
  }

  // Stage 7: what the run leaves: the model in Hugging Face's layout (for --generate, and for
  // any GPT-2 tool), the metrics and their plot, and the record of the run.
  train::plot_metrics_csv(log.path(), "GPT-2");
  if (!examples::is_main_process()) return;
  model->save_pretrained(common.out_path("model"));
  record["trained_steps"] = step;
  record["held_out_loss"] = val_loss;
  record["perplexity"] = std::exp(val_loss);
  record["peak_memory_mb"] = peak_memory_mb();
  write_record();
  fmt::print("\nheld-out loss {:.3f} nats/token (perplexity {:.1f}) after {} steps, {:.1f} minutes; peak memory "
             "{:.0f} MB\n", val_loss, std::exp(val_loss), step, budget.elapsed_seconds() / 60, peak_memory_mb());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train GPT-2 on plain text, or generate text with any GPT-2 checkpoint"};
  examples::CommonOptions common{.out_dir = "out/gpt2"};
  examples::add_common_options(app, common);
  TrainingRequest request;
  std::string preset_name = "cpu";
  app.add_option("--preset", preset_name, "the model's sizes: cpu (trains in minutes on two cores) or 124M "
                                          "(GPT-2 small)")
      ->check(CLI::IsMember({"cpu", "124M"}))
      ->capture_default_str();
  // The sizes below override the preset's; they are read after it.
  std::optional<int64_t> n_layer, n_head, n_embd, context, batch;
  std::optional<double> lr;
  app.add_option("--n-layer", n_layer, "blocks")->check(examples::above(0));
  app.add_option("--n-head", n_head, "attention heads")->check(examples::above(0));
  app.add_option("--n-embd", n_embd, "width")->check(examples::above(0));
  app.add_option("--context", context, "tokens the model reads")->check(examples::between(2, 1024));
  app.add_option("--batch", batch, "windows per step (per process under mpirun)")->check(examples::above(0));
  app.add_option("--lr", lr, "peak learning rate")->check(examples::above(0));
  app.add_option("--text", request.text_files, "UTF-8 text files to train on (default: the State of the Union "
                                               "addresses and Moby Dick)");
  app.add_option("--init-from", request.init_from, "a GPT-2 checkpoint folder in Hugging Face's layout "
                                                   "(config.json + model.safetensors): trained further, or with "
                                                   "--generate, generated from")
      ->check(CLI::ExistingDirectory);
  app.add_option("--minutes", request.minutes, "training time budget")->check(examples::above(0))->capture_default_str();
  app.add_option("--steps", request.steps, "training steps (0: as many as fit in --minutes)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--eval-every", request.eval_every, "steps between evaluations, samples and checkpoints")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--eval-tokens", request.eval_tokens, "held-out tokens scored at each evaluation (0: all)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  bool generate_only = false;
  app.add_flag("--generate", generate_only, "no training: continue --prompt with the model in --out/model, or with "
                                            "--init-from");
  SampleRequest& sample = request.sample;
  app.add_option("--prompt", sample.prompt, "the text to continue")->capture_default_str();
  app.add_option("--max-new-tokens", sample.max_new_tokens, "tokens to generate")
      ->check(examples::between(0, 100000))
      ->capture_default_str();
  app.add_option("--temperature", sample.sampling.temperature, "sampling temperature (0: greedy)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--top-k", sample.sampling.top_k, "draw among the k likeliest tokens only (0: all)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--top-p", sample.sampling.top_p, "draw among the likeliest tokens whose probabilities reach p")
      ->check(examples::between(0.0, 1.0))
      ->capture_default_str();

  return examples::run_main(app, argc, argv, common, [&] {
    // A checkpoint brings its own shape: a size given beside it would be silently ignored.
    for (const auto& [option, given] : {std::pair{"--n-layer", n_layer.has_value()},
                                        std::pair{"--n-head", n_head.has_value()},
                                        std::pair{"--n-embd", n_embd.has_value()}}) {
      EMBER_CHECK(!given || request.init_from.empty(),
                  "gpt2: {} shapes a fresh model, but --init-from {} brings its own", option, request.init_from);
    }
    Recipe& recipe = request.recipe;
    recipe = preset(preset_name);
    if (n_layer) recipe.n_layer = *n_layer;
    if (n_head) recipe.n_head = *n_head;
    if (n_embd) recipe.n_embd = *n_embd;
    if (context) recipe.context = *context;
    if (batch) recipe.batch = *batch;
    if (lr) recipe.lr = *lr;
    if (generate_only) {
      generate(common, request.init_from, sample);
    } else {
      train_model(common, request);
    }
  });
}
