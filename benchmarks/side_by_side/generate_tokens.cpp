// ember's half of the generation benchmark: GPT-2 (124M by default) continues a prompt greedily,
// one token at a time with its KV cache, and each token is timed. Prints one JSON object for the
// driver (generation.py), which runs PyTorch's twin (torch_generation.py) on the same weights
// and checks that both libraries chose the same tokens.
//
//   ./build/benchmarks/generate_tokens --new-tokens 64 --threads 2
//   ./build/benchmarks/generate_tokens --save-weights /tmp/gpt2_random   # a checkpoint for both sides
//   ./build/benchmarks/generate_tokens --init-from /tmp/gpt2_random --prompt-ids 464,3290
//
// The loop is GPT2LMHeadModel::generate's with the cache, written out so that the prompt's
// forward pass and every token can be timed apart.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ember.h"

namespace {

using namespace ember;
using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    try {
      ids.push_back(std::stoll(item));
    } catch (const std::exception&) {
      fail("--prompt-ids: '{}' is not an integer (expected ids separated by commas, such as 464,3290)", item);
    }
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  nn::GPT2Config config;
  std::string init_from, save_weights, prompt_ids;
  int64_t prompt_tokens = 16, new_tokens = 64;
  int threads = 0;
  uint64_t seed = 0;
  CLI::App app{"GPT-2 generation with a KV cache, timed token by token"};
  app.add_option("--n-layer", config.n_layer, "blocks")->capture_default_str();
  app.add_option("--n-head", config.n_head, "attention heads")->capture_default_str();
  app.add_option("--n-embd", config.n_embd, "width")->capture_default_str();
  app.add_option("--context", config.n_positions, "positions")->capture_default_str();
  app.add_option("--init-from", init_from, "a GPT-2 checkpoint folder (config.json + model.safetensors)");
  app.add_option("--save-weights", save_weights, "write the (random) model here in Hugging Face's layout, and exit");
  app.add_option("--prompt-ids", prompt_ids, "the prompt's token ids, separated by commas (default: random ids)");
  app.add_option("--prompt-tokens", prompt_tokens, "random prompt length")->capture_default_str();
  app.add_option("--new-tokens", new_tokens, "tokens to generate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads (0: all cores)")->capture_default_str();
  app.add_option("--seed", seed, "seed of the random weights and prompt")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    if (threads > 0) train::set_threads(threads);
    manual_seed(seed);
    auto model = init_from.empty() ? std::make_shared<nn::GPT2LMHeadModel>(config)
                                   : nn::GPT2LMHeadModel::from_pretrained(init_from);
    if (!save_weights.empty()) {
      model->save_pretrained(save_weights);
      return 0;
    }
    model->eval();
    const nn::GPT2Config& sizes = model->config();
    std::vector<int64_t> prompt = prompt_ids.empty() ? randint(0, sizes.vocab_size, {prompt_tokens}).to_vector<int64_t>()
                                                     : parse_ids(prompt_ids);
    EMBER_CHECK(!prompt.empty() && static_cast<int64_t>(prompt.size()) + new_tokens <= sizes.n_positions,
                "generate_tokens: a prompt of {} tokens and {} new ones must fit in the context of {}", prompt.size(),
                new_tokens, sizes.n_positions);

    NoGradGuard no_grad;
    nn::GPT2Cache cache;
    std::vector<int64_t> generated;
    std::vector<double> token_ms;
    // The prompt in one forward pass fills the cache; then each token reads only itself.
    Clock::time_point start = Clock::now();
    Tensor states = model->transformer->forward(tensor(prompt, {1, static_cast<int64_t>(prompt.size())}), &cache);
    int64_t next = argmax(model->lm_head->forward(states.select(1, -1)), -1).item<int64_t>();
    const double prompt_ms = milliseconds_since(start);
    generated.push_back(next);
    for (int64_t i = 1; i < new_tokens; ++i) {
      start = Clock::now();
      states = model->transformer->forward(tensor<int64_t>({next}, {1, 1}), &cache);
      next = argmax(model->lm_head->forward(states.select(1, -1)), -1).item<int64_t>();
      token_ms.push_back(milliseconds_since(start));
      generated.push_back(next);
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const nlohmann::json result = {
        {"library", "ember"},
        {"threads", threads},
        {"n_layer", sizes.n_layer},
        {"n_head", sizes.n_head},
        {"n_embd", sizes.n_embd},
        {"parameters", model->num_parameters()},
        {"prompt_tokens", prompt.size()},
        {"prompt_ms", prompt_ms},
        {"token_ms", token_ms},
        {"median_token_ms", median(token_ms)},
        {"generated", generated},
        {"peak_rss_mb", static_cast<double>(usage.ru_maxrss) / 1024.0}};
    fmt::print("{}\n", result.dump());
  } catch (const ember::Error& error) {
    fmt::print(stderr, "error: {}\n", error.what());
    return 1;
  }
  return 0;
}
