// Worked example 6, "Character language model": a small decoder-only transformer learns Moby
// Dick one character at a time, prints what it writes as it trains, and is scored on the last
// 10% of the book in nats per character.
//
//   ./build/examples/char_language_model                       # train for --minutes 15
//   ./build/examples/char_language_model --sample "Call me Ishmael" --length 400
//
// Read it top to bottom: data, tokenizer, model, batches, evaluation, the plan, the loop, and
// the sampling mode that loads what the training run saved.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
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
#include "common/token_windows.h"
#include "ember.h"
#include "nn/data/datasets.h"
#include "nn/text/text.h"
#include "nn/train/train.h"

using namespace ember;

namespace {

// ---- The recipe ------------------------------------------------------------------------------
//
// Every choice that shapes the model and its training, with the defaults that reach the bar.
// The model's sizes are saved with it (config.json), so that --sample rebuilds the same model.
struct Recipe {
  // The model: GPT's layout at a size a 2-core CPU trains in minutes.
  int64_t context = 128;  // characters the model reads to predict the next one
  int64_t d_model = 128;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t d_ff = 512;
  std::string activation = "relu";  // of the feed-forward layers: "relu" (measured best here) or "gelu"
  double dropout = 0.0;
  // The training.
  int64_t batch = 32;  // windows of context + 1 characters per step
  double lr = 2e-3;
  int64_t warmup = 100;     // steps of linear warmup, then a cosine decay to lr / 10
  double weight_decay = 0.1;
  double clip = 1.0;        // the gradients' total norm is clipped to it
};

nn::CausalLanguageModelOptions model_options(const Recipe& recipe, int64_t vocab_size) {
  EMBER_CHECK(recipe.activation == "gelu" || recipe.activation == "relu",
              "activation '{}': expected gelu or relu", recipe.activation);
  return {.vocab_size = vocab_size,
          .max_len = recipe.context,
          .num_layers = recipe.layers,
          .layer = {.d_model = recipe.d_model,
                    .num_heads = recipe.heads,
                    .d_ff = recipe.d_ff,
                    .dropout = recipe.dropout,
                    .activation = recipe.activation == "relu" ? nn::Activation::ReLU : nn::Activation::GELU,
                    .norm_first = true},
          .tie_embeddings = true,
          .final_norm = true};
}

// ---- Batches and evaluation windows ---------------------------------------------------------
//
// A batch is `batch` windows of context + 1 characters, each starting at a random offset: the
// model reads the first `context` of them and predicts the last `context`. The offsets of step
// s depend on (seed, s) only, so a resumed run sees the same batches (common/token_windows.h).
// The validation loss is in nats per character: the whole validation text in windows that
// overlap by half, each character scored once (common/token_windows.h).
using examples::ValidationWindows;

// The mean loss in nats per character, in eval mode (no dropout) and without recording.
double validation_loss(nn::CausalLanguageModel& model, const ValidationWindows& windows, int64_t batch,
                       Device device) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double total = 0;
  const int64_t count = windows.inputs.size(0);
  for (int64_t first = 0; first < count; first += batch) {
    const int64_t rows = std::min(batch, count - first);
    const Tensor inputs = windows.inputs.narrow(0, first, rows).to(device);
    const Tensor targets = windows.targets.narrow(0, first, rows).to(device);
    const Tensor loss = nn::cross_entropy(model.forward(inputs), targets,
                                          {.ignore_index = kIgnoreIndex, .reduction = Reduction::Sum});
    total += loss.item<double>();
  }
  model.train(was_training);
  return total / static_cast<double>(windows.scored);
}

// ---- Sampling ---------------------------------------------------------------------------------
//
// The prompt's characters must be in the alphabet, and the prompt must fit the model's context:
// both are checked here, with messages that say what to change. The tokenizer has no unknown
// token, so its own error names the first character it does not know.
std::vector<int64_t> encode_prompt(const text::Tokenizer& tokenizer, const std::string& prompt, int64_t context) {
  EMBER_CHECK(!prompt.empty(), "the prompt is empty: give the text to continue, e.g. --sample \"Call me Ishmael\"");
  std::vector<int64_t> ids;
  try {
    ids = tokenizer.encode(prompt);
  } catch (const Error& error) {
    fail("the prompt cannot be written with the characters of Moby Dick: {}", error.what());
  }
  EMBER_CHECK(static_cast<int64_t>(ids.size()) <= context,
              "the prompt has {} characters, but the model reads at most {} (its context): shorten it", ids.size(),
              context);
  return ids;
}

void check_top_k(int64_t top_k, int64_t vocab_size) {
  EMBER_CHECK(top_k <= vocab_size, "--top-k {}: the alphabet has {} characters; use 1 to {}, or 0 for all", top_k,
              vocab_size, vocab_size);
}

// Continues `prompt` by `length` characters. The draws use their own seed and leave the global
// generator where it was, so sampling during training changes nothing in the training run, and
// the samples at successive evaluations use the same random numbers: what changes is the model.
std::string sample_text(nn::CausalLanguageModel& model, const text::Tokenizer& tokenizer,
                        const std::vector<int64_t>& prompt, int64_t length, nn::SamplingOptions sampling,
                        uint64_t seed, Device device) {
  const PhiloxState saved = Generator::global().state();
  manual_seed(seed);
  const Tensor ids = model.generate(tensor(prompt, {static_cast<int64_t>(prompt.size())}).to(device), length, sampling);
  Generator::global().set_state(saved);
  return tokenizer.decode(ids.to(Device::cpu()).to_vector<int64_t>());
}

// A sample printed as a quoted block, so where it starts and ends is clear.
std::string indented(const std::string& text) {
  std::string out = "    | ";
  for (char c : text) out += c == '\n' ? std::string("\n    | ") : std::string(1, c);
  return out;
}

// ---- The files of a run ---------------------------------------------------------------------
//
// config.json holds the model's sizes (for --sample), the run's plan (for --resume) and, at the
// end, what it reached.
nlohmann::json recipe_json(const Recipe& recipe, int64_t vocab_size) {
  return {{"vocab_size", vocab_size}, {"context", recipe.context}, {"d_model", recipe.d_model},
          {"layers", recipe.layers},  {"heads", recipe.heads},     {"d_ff", recipe.d_ff},
          {"activation", recipe.activation}, {"dropout", recipe.dropout}, {"batch", recipe.batch},    {"lr", recipe.lr},
          {"warmup", recipe.warmup},  {"weight_decay", recipe.weight_decay}, {"clip", recipe.clip}};
}

void write_json(const std::string& path, const nlohmann::json& json) {
  nn::write_file_atomically(path, json.dump(2) + "\n");
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

std::string json_string(const nlohmann::json& json, const std::string& key, const std::string& path) {
  EMBER_CHECK(json.contains(key) && json[key].is_string(), "{}: expected a string '{}'", path, key);
  return json[key].get<std::string>();
}

// ---- Sampling from a saved model: --sample ---------------------------------------------------

struct SampleRequest {
  std::string prompt;
  int64_t length = 200;
  double temperature = 0.8;
  int64_t top_k = 10;
};

void sample_from_saved_model(const examples::CommonOptions& common, const SampleRequest& request) {
  const Device device = train::parse_device(common.device);
  train::set_threads(common.threads);
  const std::string config_path = common.out_path("config.json");
  const std::optional<nlohmann::json> config = read_json(config_path);
  EMBER_CHECK(config.has_value(),
              "--sample: no trained model in {}/ (config.json is missing); train one first with "
              "./build/examples/char_language_model --out {}",
              common.out_dir, common.out_dir);
  const auto tokenizer = text::load_tokenizer(common.out_path("tokenizer.json"));

  const Recipe recipe{.context = examples::config_integer(*config, "context", config_path),
                      .d_model = examples::config_integer(*config, "d_model", config_path),
                      .layers = examples::config_integer(*config, "layers", config_path),
                      .heads = examples::config_integer(*config, "heads", config_path),
                      .d_ff = examples::config_integer(*config, "d_ff", config_path),
                      .activation = json_string(*config, "activation", config_path)};
  const int64_t vocab_size = examples::config_integer(*config, "vocab_size", config_path);
  EMBER_CHECK(vocab_size == tokenizer->vocab_size(), "{}: the model has {} characters, tokenizer.json {}",
              config_path, vocab_size, tokenizer->vocab_size());
  nn::CausalLanguageModel model(model_options(recipe, vocab_size));
  nn::load(model, common.out_path("model.safetensors"));
  model.to(device);

  check_top_k(request.top_k, vocab_size);
  const std::vector<int64_t> prompt = encode_prompt(*tokenizer, request.prompt, recipe.context);
  const std::string sample = sample_text(model, *tokenizer, prompt, request.length,
                                         {.temperature = request.temperature, .top_k = request.top_k},
                                         common.seed, device);
  fmt::print("{}\n", sample);
}

// ---- Training ---------------------------------------------------------------------------------

struct TrainingRequest {
  Recipe recipe;
  double minutes = 15;
  int64_t steps = 0;         // 0: plan from the time budget
  int64_t eval_every = 250;  // evaluate, print a sample and save a checkpoint every this many steps
  std::string prompt = "Call me Ishmael";
  SampleRequest sampling;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The schedule: linear warmup, then cosine decay to a tenth of the peak at the planned last step.
// A run shorter than the warmup (a quick try) warms up over the whole run.
std::unique_ptr<nn::Scheduler> make_scheduler(nn::Optimizer& optimizer, const Recipe& recipe, int64_t total_steps) {
  return std::make_unique<nn::Scheduler>(
      optimizer, std::make_shared<nn::WarmupCosine>(recipe.lr, std::min(recipe.warmup, total_steps), total_steps,
                                                    recipe.lr / 10));
}

void train_model(const examples::CommonOptions& common, const TrainingRequest& request) {
  const Recipe& recipe = request.recipe;
  const Device device = examples::setup_run(common);

  // Stage 1: the text. The last 10% of Moby Dick's characters are validation (DATA.md).
  const datasets::TextSplit book = datasets::load_moby_dick(common.data_dir);
  fmt::print("Moby Dick: {} characters, {} for training, the last {} for validation\n", book.characters,
             book.characters - book.validation_characters, book.validation_characters);

  // Stage 2: the tokenizer. One id per character of the training text, and no special tokens:
  // a language model over running text needs no padding (every window is whole) and no
  // unknown token (a prompt with a character the book never uses is refused, not guessed).
  const auto tokenizer =
      text::CharTokenizer::train({book.train}, {.specials = text::SpecialTokens::none()});
  const std::vector<int64_t> train_ids = tokenizer.encode(book.train);
  const std::vector<int64_t> validation_ids = tokenizer.encode(book.validation);
  fmt::print("alphabet: {} characters; \"Call me\" -> {}\n", tokenizer.vocab_size(),
             fmt::join(tokenizer.encode("Call me"), " "));

  // Stage 3: the model. Pre-LN blocks (normalise each sublayer's input, then a final LayerNorm)
  // train stably at a high learning rate without a long warmup; the output layer shares the
  // character embeddings' table.
  auto model = std::make_shared<nn::CausalLanguageModel>(model_options(recipe, tokenizer.vocab_size()));
  // Embedding tables start as N(0, 1), right for a lookup; but tied to the output layer, that
  // table makes the first logits about sqrt(d_model) times too large: the untrained model would
  // be sure of a random character, at a loss near 85 nats instead of ln(83) = 4.4. GPT starts
  // its embeddings at N(0, 0.02); so do we.
  nn::init::normal_(model->token_embedding->weight, 0.0, 0.02);
  nn::init::normal_(model->position_embedding->weight, 0.0, 0.02);
  model->to(device);
  fmt::print("model: {} layers, d_model {}, {} heads, d_ff {}, context {}: {} parameters\n", recipe.layers,
             recipe.d_model, recipe.heads, recipe.d_ff, recipe.context, model->num_parameters());

  // Stage 4: the optimizer. AdamW decays the matrices only (not biases and LayerNorm gains).
  nn::AdamW optimizer(nn::weight_decay_groups(*model, recipe.weight_decay), {.lr = recipe.lr});
  // --precision fp16 scales the loss; the scale is saved with the checkpoints.
  const train::Precision precision = common.precision_choice();
  nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});

  const ValidationWindows validation = examples::validation_windows(validation_ids, recipe.context);
  // Evaluation batches of about 8k characters: larger ones only cost memory (the attention
  // scores grow with the square of the context).
  const int64_t eval_batch = std::max<int64_t>(1, 8192 / recipe.context);
  const std::vector<int64_t> prompt = encode_prompt(tokenizer, request.prompt, recipe.context);
  check_top_k(request.sampling.top_k, tokenizer.vocab_size());
  const nn::SamplingOptions sampling{.temperature = request.sampling.temperature, .top_k = request.sampling.top_k};
  const uint64_t sample_seed = common.seed + 1;

  // Stage 5: the plan. The run lasts `steps` steps; the learning rate decays to its floor at the
  // last one. A resumed run takes the plan of the run it continues (config.json); --steps N
  // fixes it; otherwise it is measured: a first evaluation and sample, then a few training
  // steps at the warmup's rates (which do not depend on the total), give the time of each, and
  // the step count that fills the budget follows. Should the steps turn out slower than planned,
  // the schedule is paced to end with the time (train::TimeBudget).
  const std::string config_path = common.out_path("config.json");
  const std::string checkpoint_path = common.out_path("checkpoint.safetensors");
  nlohmann::json config = recipe_json(recipe, tokenizer.vocab_size());
  int64_t total_steps = request.steps;
  if (common.resume) {
    if (const auto saved = read_json(config_path); saved && std::filesystem::exists(checkpoint_path)) {
      // The checkpoint would refuse other sizes on its own; the recipe's other choices (learning
      // rate, batch...) would go through silently and make a run that is neither one nor the other.
      std::vector<std::string> differences;
      for (const auto& [key, value] : config.items()) {
        if (saved->contains(key) && (*saved)[key] != value) {
          differences.push_back(fmt::format("{} {} (now {})", key, (*saved)[key].dump(), value.dump()));
        }
      }
      EMBER_CHECK(differences.empty(),
                  "--resume: the run in {}/ was trained with another recipe: {}; resume with its options, or start "
                  "afresh without --resume",
                  common.out_dir, fmt::join(differences, ", "));
      const int64_t planned = examples::config_integer(*saved, "steps", config_path);
      if (total_steps == 0) total_steps = planned;
      EMBER_CHECK(total_steps == planned, "--resume: the run in {}/ planned {} steps, not --steps {}",
                  common.out_dir, planned, total_steps);
    }
  }

  const Clock::time_point start_time = Clock::now();
  train::TimeBudget budget({.seconds = request.minutes * 60});
  // A provisional schedule for the planning steps; replaced once the plan is fixed.
  std::unique_ptr<nn::Scheduler> scheduler =
      make_scheduler(optimizer, recipe, total_steps > 0 ? total_steps : std::numeric_limits<int32_t>::max());
  int64_t step = 0;
  if (common.resume && total_steps > 0) {
    std::string found;
    if (auto resumed = train::resume_from(checkpoint_path, *model, optimizer, scheduler.get(), &found, &scaler)) {
      step = *resumed;
    }
    fmt::print("--resume: {} (of {} steps)\n", found, total_steps);
  }
  budget.pace(*scheduler, total_steps);
  const int64_t start_step = step;
  // The clock column counts the training time of the whole run, across resumptions.
  double elapsed_before = 0;
  if (start_step > 0 && std::filesystem::exists(common.out_path("metrics.csv"))) {
    for (const auto& [at_step, seconds] : train::read_metrics_csv(common.out_path("metrics.csv")).series("elapsed_s")) {
      if (at_step <= static_cast<double>(start_step)) elapsed_before = seconds;
    }
  }
  auto elapsed = [&] { return elapsed_before + seconds_since(start_time); };
  train::MetricsLog log(common.out_path("metrics.csv"), {"train_loss", "val_loss", "lr", "elapsed_s"},
                        start_step > 0 ? std::optional<int64_t>(start_step) : std::nullopt);

  // Scores the validation text and samples from the prompt; returns both and the seconds taken.
  auto evaluate = [&] {
    const Clock::time_point eval_start = Clock::now();
    const double val_loss = validation_loss(*model, validation, eval_batch, device);
    const std::string sample =
        sample_text(*model, tokenizer, prompt, request.sampling.length, sampling, sample_seed, device);
    return std::tuple{val_loss, sample, seconds_since(eval_start)};
  };
  auto report = [](int64_t at_step, double val_loss, const std::string& sample) {
    return fmt::format("step {}: validation loss {:.4f} nats/char ({:.3f} bits)\n{}", at_step, val_loss,
                       val_loss / std::log(2.0), indented(sample));
  };

  // One training step: forward, backward, clip, update. Every batch has the same shape, so on a
  // GPU the step is captured once as a CUDA graph and replayed (nn/train/graphed_steps.h); the
  // schedule runs outside it, and a replay reads the rate it set. Returns the batch's loss.
  // With --precision bf16 or fp16 the forward pass and the loss run under autocast; fp16 also
  // scales the loss, and the gradients are unscaled before they are clipped.
  train::GraphedSteps forward_backward_update(
      [&](std::span<const Tensor> batch) {
        optimizer.zero_grad();
        Tensor loss;
        {
          const AutocastGuard autocast = train::autocast_scope(precision, device.type);
          loss = model->loss(batch[0]);
        }
        scaler.scale(loss).backward();
        scaler.unscale_(optimizer);
        nn::clip_grad_norm_(model->parameters(), recipe.clip);
        scaler.step(optimizer);
        scaler.update();
        return loss;
      },
      {.enabled = examples::cuda_graphs_apply(common, device)});
  auto train_step = [&](int64_t at_step) {
    const Tensor loss = forward_backward_update({examples::random_windows(train_ids, at_step, recipe.batch, recipe.context + 1, common.seed, device)});
    budget.step_done();  // the schedule's next step, or further if the time runs short
    return loss.item<double>();
  };

  // The training loss shown and logged is the mean over the steps since the last row of the
  // metrics (every log_every steps, and at each evaluation): one batch's loss is noisy.
  // Checkpoints are saved at evaluations, so a resumed run starts a fresh mean exactly where the
  // uninterrupted run did.
  const int64_t log_every = std::max<int64_t>(1, request.eval_every / 5);
  double loss_sum = 0;
  int64_t loss_count = 0;
  auto record = [&](double loss) {
    loss_sum += loss;
    ++loss_count;
  };
  auto mean_train_loss = [&] { return loss_sum / static_cast<double>(std::max<int64_t>(1, loss_count)); };
  auto first_evaluation = [&] {
    const auto [val_loss, sample, seconds] = evaluate();
    log.write(0, {{"val_loss", val_loss}, {"elapsed_s", elapsed()}});
    fmt::print("{}\n", report(0, val_loss, sample));
    return seconds;
  };

  if (total_steps == 0) {
    constexpr int64_t kPlanningSteps = 20, kUntimedSteps = 5;
    EMBER_CHECK(recipe.warmup >= kPlanningSteps,
                "--warmup {}: planning the run from --minutes takes {} warmup steps; use --warmup {} or more, or "
                "give --steps",
                recipe.warmup, kPlanningSteps, kPlanningSteps);
    const double eval_seconds = first_evaluation();
    for (step = 1; step <= kPlanningSteps; ++step) record(train_step(step - 1));
    step = kPlanningSteps;
    const double step_seconds = budget.median_step_seconds(kUntimedSteps);  // the first steps warm the allocator up
    // Time left, less a 3% margin and the last step's evaluation, shared between steps and one
    // evaluation every eval_every steps.
    total_steps = step + std::max<int64_t>(1, budget.steps_that_fit(step_seconds + eval_seconds / request.eval_every,
                                                                    0.03 * budget.budget_seconds() + eval_seconds));
    fmt::print("plan: {:.0f} ms per step, {:.1f} s per evaluation and sample -> {} steps in {:.0f} minutes "
               "(--steps {} repeats this run)\n",
               1000 * step_seconds, eval_seconds, total_steps, request.minutes, total_steps);
    const nn::StateDict schedule_state = scheduler->state_dict();
    scheduler = make_scheduler(optimizer, recipe, total_steps);
    scheduler->load_state_dict(schedule_state);
    budget.pace(*scheduler, total_steps);
  } else if (start_step == 0) {
    first_evaluation();
  }
  config["steps"] = total_steps;
  write_json(config_path, config);

  // Stage 6: the loop. Each step reads a random batch; every eval_every steps (and at the last
  // one) the whole validation text is scored, a sample printed, and a checkpoint saved.
  train::CheckpointSaver saver(checkpoint_path, request.eval_every, *model, optimizer, scheduler.get(), &scaler);
  train::ProgressBar progress(total_steps, {.label = "train", .unit = "chars"}, step);
  double val_loss = std::nan("");
  while (!budget.finished()) {
    ++step;
    record(train_step(step - 1));
    progress.update(step, {{"loss", mean_train_loss()}, {"lr", optimizer.lr(0)}},
                    static_cast<double>(recipe.batch * recipe.context));
    const bool evaluate_now = step % request.eval_every == 0 || budget.finished();
    if (step % log_every != 0 && !evaluate_now) continue;
    train::MetricValues values = {{"train_loss", mean_train_loss()}, {"lr", optimizer.lr(0)}};
    loss_sum = 0;
    loss_count = 0;
    if (evaluate_now) {
      const auto [loss, sample, seconds] = evaluate();
      val_loss = loss;
      values.push_back({"val_loss", val_loss});
      progress.print_line(report(step, val_loss, sample));
      saver.save(step);
    }
    values.push_back({"elapsed_s", elapsed()});
    log.write(step, values);
  }
  progress.finish();
  // A run resumed from its last checkpoint has no step left to take: score what it saved.
  if (std::isnan(val_loss)) val_loss = validation_loss(*model, validation, eval_batch, device);
  const int64_t last_step = std::min(step, total_steps);
  if (budget.out_of_time() && last_step < total_steps) {
    fmt::print("the {}-minute budget ran out at step {} of {}; the learning rate's schedule was paced to end with "
               "it\n", request.minutes, last_step, total_steps);
  }

  // Stage 7: what the run leaves behind: the model, its tokenizer and config for --sample, and
  // the curves of the metrics.
  nn::save(*model, common.out_path("model.safetensors"));
  tokenizer.save(common.out_path("tokenizer.json"));
  config["trained_steps"] = last_step;
  config["validation_loss"] = val_loss;
  config["seconds"] = elapsed();
  write_json(config_path, config);
  train::plot_metrics_csv(log.path(), "character language model on Moby Dick");
  fmt::print("\nvalidation loss {:.4f} nats per character ({:.3f} bits) after {} steps, {:.1f} minutes\n",
             val_loss, val_loss / std::log(2.0), last_step, elapsed() / 60);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a character-level transformer language model on Moby Dick, or sample from one"};
  examples::CommonOptions common{.out_dir = "out/char_language_model"};
  examples::add_common_options(app, common);
  TrainingRequest request;
  Recipe& recipe = request.recipe;
  app.add_option("--minutes", request.minutes, "training time budget (the learning rate's schedule ends with it)")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--steps", request.steps, "training steps (0: as many as fit in --minutes)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--eval-every", request.eval_every, "steps between evaluations, samples and checkpoints")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--context", recipe.context, "characters the model reads")->check(examples::between(2, 4096))->capture_default_str();
  app.add_option("--d-model", recipe.d_model, "width of the model")->check(examples::above(0))->capture_default_str();
  app.add_option("--layers", recipe.layers, "transformer blocks")->check(examples::above(0))->capture_default_str();
  app.add_option("--heads", recipe.heads, "attention heads")->check(examples::above(0))->capture_default_str();
  app.add_option("--d-ff", recipe.d_ff, "width of the feed-forward layers")->check(examples::above(0))->capture_default_str();
  app.add_option("--activation", recipe.activation, "of the feed-forward layers")
      ->check(CLI::IsMember({"gelu", "relu"}))
      ->capture_default_str();
  app.add_option("--dropout", recipe.dropout, "dropout rate")->check(examples::between(0.0, 0.9))->capture_default_str();
  app.add_option("--batch", recipe.batch, "windows per step")->check(examples::above(0))->capture_default_str();
  app.add_option("--lr", recipe.lr, "peak learning rate")->check(examples::above(0))->capture_default_str();
  app.add_option("--warmup", recipe.warmup, "warmup steps")->check(examples::at_least(0))->capture_default_str();
  app.add_option("--weight-decay", recipe.weight_decay, "AdamW's weight decay")->check(examples::at_least(0))->capture_default_str();
  app.add_option("--clip", recipe.clip, "gradient norm clipping")->check(examples::above(0))->capture_default_str();
  app.add_option("--prompt", request.prompt, "the text the samples during training continue")->capture_default_str();
  std::string sample_prompt;
  CLI::Option* sample_option =
      app.add_option("--sample", sample_prompt, "load the model saved in --out and continue this text");
  SampleRequest& sampling = request.sampling;
  app.add_option("--length", sampling.length, "characters to sample")->check(examples::between(0, 100000))->capture_default_str();
  app.add_option("--temperature", sampling.temperature, "sampling temperature (0: always the likeliest character)")
      ->check(examples::at_least(0))
      ->capture_default_str();
  app.add_option("--top-k", sampling.top_k, "draw among the k likeliest characters only (0: all)")
      ->check(examples::at_least(0))
      ->capture_default_str();

  return examples::run_main(app, argc, argv, common, [&] {
    if (sample_option->count() > 0) {
      sampling.prompt = sample_prompt;
      sample_from_saved_model(common, sampling);
    } else {
      train_model(common, request);
    }
  });
}
