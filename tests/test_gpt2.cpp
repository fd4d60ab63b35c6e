// nn::GPT2* against GPT-2 written out in PyTorch (tests/golden/make_gpt2_golden.py, float64,
// dropout off): two checkpoint folders in the two key forms found in the wild (the hub's `gpt2`,
// saved from the base model with the old mask buffers, and a GPT2LMHeadModel's), which must
// give the reference's states, logits, loss and every gradient to 1e-9. Then what the loader
// reports or refuses, save_pretrained's files in three dtypes, the config reader, the KV cache
// (forward in pieces, and generation with and without it), sampling, training, and errors.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "golden_files.h"
#include "helpers.h"
#include "nn/models/gpt2/gpt2.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::testing;

namespace {

constexpr double kTolerance = 1e-9;

const GoldenTensors& golden() {
  static const GoldenTensors tensors("gpt2_tiny_golden.safetensors");
  return tensors;
}

const Tensor& expected(const std::string& key) { return golden().at(key); }

// The golden checkpoint in float64, eval mode.
std::shared_ptr<nn::GPT2LMHeadModel> golden_model(const std::string& folder, nn::CheckpointLoadReport* report = nullptr) {
  auto model = nn::GPT2LMHeadModel::from_pretrained(golden_path(folder), kFloat64, report);
  model->eval();
  return model;
}

// A small GPT-2 for the tests that need no reference: 2 blocks of width 16, 4 heads.
nn::GPT2Config small_config() {
  nn::GPT2Config config;
  config.vocab_size = 37;
  config.n_positions = 24;
  config.n_embd = 16;
  config.n_layer = 2;
  config.n_head = 4;
  return config;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("GPT2LMHeadModel from either key form gives the reference's states, logits, loss and every gradient") {
  for (const char* folder : {"gpt2_tiny_hub", "gpt2_tiny_lm"}) {
    CAPTURE(folder);
    auto model = golden_model(folder);
    const Tensor ids = expected("ids");
    check_close(model->transformer->forward(ids), expected("states"), kTolerance, kTolerance);
    check_close(model->forward(ids), expected("logits"), kTolerance, kTolerance);
    const Tensor loss = model->loss(ids);
    check_close(reshape(loss, {1}), reshape(expected("loss"), {1}), kTolerance, kTolerance);
    loss.backward();
    const nn::StateDict parameters = model->state_dict();
    int checked = 0;
    for (const auto& [key, gradient] : golden().all()) {
      if (!key.starts_with("grad.")) continue;
      const std::string name = key.substr(5);
      CAPTURE(name);
      REQUIRE(parameters.contains(name));
      check_close(parameters.at(name).grad(), gradient, kTolerance, kTolerance);
      ++checked;
    }
    // 2 embeddings, 12 tensors per block, the final LayerNorm's 2.
    CHECK(checked == 2 + 12 * 2 + 2);
  }
}

TEST_CASE("the loss with targets and chunked output layer equals cross_entropy of the full logits") {
  auto model = golden_model("gpt2_tiny_lm");
  const Tensor ids = expected("ids");
  const Tensor inputs = ids.slice(1, std::nullopt, -1), targets = ids.slice(1, 1, std::nullopt).clone();
  const Tensor reference = cross_entropy(model->forward(inputs), targets);
  for (int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{0}}) {
    model->loss_chunk_rows = chunk;
    check_close(model->loss(inputs, targets), reference, 1e-12, 1e-12);
  }
  // An ignored target counts for nothing.
  std::vector<int64_t> values = targets.to_vector<int64_t>();
  values[0] = values[5] = -100;
  const Tensor some_ignored = tensor(values, targets.sizes());
  const Tensor logits = model->forward(inputs);
  check_close(model->loss(inputs, some_ignored), cross_entropy(logits, some_ignored), 1e-12, 1e-12);
}

TEST_CASE("from_pretrained skips the mask buffers, reports unexpected keys and refuses missing ones or wrong shapes") {
  nn::CheckpointLoadReport report;
  golden_model("gpt2_tiny_hub", &report);
  CHECK(report.missing.empty());
  CHECK(report.unexpected.empty());  // the attn.bias and attn.masked_bias buffers are not reported

  ScratchDir scratch("gpt2_loading");
  const nn::StateDict file = nn::load_safetensors(golden_path("gpt2_tiny_lm/model.safetensors"));
  const auto write_checkpoint = [&](const nn::StateDict& tensors) {
    std::filesystem::copy_file(golden_path("gpt2_tiny_lm/config.json"), scratch.dir() / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
    nn::save_safetensors(scratch.path() + "/model.safetensors", tensors);
  };
  nn::StateDict extra = file;
  extra["score.weight"] = zeros({2, 24}, kFloat64);
  write_checkpoint(extra);
  nn::GPT2LMHeadModel::from_pretrained(scratch.path(), kFloat32, &report);
  CHECK(report.unexpected == std::vector<std::string>{"score.weight"});

  nn::StateDict lacking = file;
  lacking.erase("transformer.h.1.mlp.c_fc.weight");
  write_checkpoint(lacking);
  CHECK_THROWS_WITH_ALL(nn::GPT2LMHeadModel::from_pretrained(scratch.path()), "GPT2LMHeadModel.from_pretrained",
                        "transformer.h.1.mlp.c_fc.weight", "lacks 1");

  nn::StateDict transposed = file;
  transposed["transformer.h.0.attn.c_attn.weight"] = transpose(file.at("transformer.h.0.attn.c_attn.weight"), 0, 1);
  write_checkpoint(transposed);
  CHECK_THROWS_WITH_ALL(nn::GPT2LMHeadModel::from_pretrained(scratch.path()), "transformer.h.0.attn.c_attn.weight",
                        "[24, 72]", "[72, 24]");
  CHECK_THROWS_WITH_ALL(nn::GPT2LMHeadModel::from_pretrained(golden_path("no_such_gpt2")), "no_such_gpt2");
}

TEST_CASE("save_pretrained writes Hugging Face's layout in float32, bf16 and f16, and from_pretrained reads it back") {
  manual_seed(11);
  nn::GPT2LMHeadModel model(small_config());
  model.eval();
  const Tensor ids = randint(0, 37, {2, 9});
  const Tensor logits = model.forward(ids);
  ScratchDir scratch("gpt2_saving");
  for (DType dtype : {kFloat32, kBFloat16, kFloat16}) {
    CAPTURE(dtype);
    const std::string folder = scratch.path() + "/" + std::string(dtype_name(dtype));
    model.save_pretrained(folder, dtype);
    const nn::StateDict file = nn::load_safetensors(folder + "/model.safetensors");
    CHECK_FALSE(file.contains("lm_head.weight"));  // tied: saved once, as the token table
    CHECK(file.at("transformer.h.0.attn.c_attn.weight").sizes() == Shape{16, 48});
    CHECK(file.at("transformer.h.1.mlp.c_proj.weight").sizes() == Shape{64, 16});
    CHECK(file.at("transformer.wte.weight").dtype() == dtype);
    auto loaded = nn::GPT2LMHeadModel::from_pretrained(folder);
    loaded->eval();
    // Every parameter is the saved one rounded to the file's dtype, so float32 is exact.
    for (const auto& [key, value] : model.state_dict()) {
      CAPTURE(key);
      check_close(loaded->state_dict().at(key), value.to(dtype).to(kFloat32), 0.0, 0.0);
    }
    if (dtype == kFloat32) check_close(loaded->forward(ids), logits, 0.0, 0.0);
    CHECK(loaded->transformer->wte->weight.data_ptr<float>() == loaded->lm_head->weight.data_ptr<float>());
  }
}

TEST_CASE("GPT2Config reads Hugging Face's keys, writes them back, and refuses what ember does not build") {
  const nn::GPT2Config config = nn::GPT2Config::from_json_file(golden_path("gpt2_tiny_lm/config.json"));
  CHECK(config.vocab_size == 50);
  CHECK(config.n_positions == 16);
  CHECK(config.n_embd == 24);
  CHECK(config.n_layer == 2);
  CHECK(config.n_head == 4);
  CHECK(config.inner_size() == 96);
  CHECK(config.activation() == nn::Activation::GELUTanh);
  CHECK(config.layer_norm_epsilon == 1e-5);

  ScratchDir scratch("gpt2_config");
  const std::string path = scratch.path() + "/config.json";
  nn::GPT2Config written = small_config();
  written.n_inner = 40;
  written.attn_pdrop = 0.0;
  written.tie_word_embeddings = false;
  written.to_json_file(path, "bfloat16");
  const nn::GPT2Config read = nn::GPT2Config::from_json_file(path);
  CHECK(read.n_inner == std::optional<int64_t>(40));
  CHECK(read.attn_pdrop == 0.0);
  CHECK_FALSE(read.tie_word_embeddings);
  CHECK(read.vocab_size == 37);

  const auto refused = [&](const std::string& json, std::initializer_list<const char*> fragments) {
    write_text(path, json);
    bool thrown = false;
    try {
      (void)nn::GPT2Config::from_json_file(path);
    } catch (const Error& error) {
      thrown = true;
      const std::string message = error.what();
      for (const char* fragment : fragments) CHECK_MESSAGE(message.find(fragment) != std::string::npos, message);
    }
    CHECK_MESSAGE(thrown, json);
  };
  refused(R"({"n_embd": 30, "n_head": 4})", {"n_embd 30", "n_head 4"});
  refused(R"({"n_layer": 12.5})", {"n_layer"});
  refused(R"({"add_cross_attention": true})", {"add_cross_attention"});
  refused(R"({"scale_attn_by_inverse_layer_idx": true})", {"scale_attn_by_inverse_layer_idx"});
  refused(R"({"activation_function": "swish"})", {"activation_function", "swish"});
  refused(R"({"resid_pdrop": 1.0})", {"resid_pdrop"});
  CHECK_THROWS_WITH_ALL(nn::GPT2Config::from_json_file(scratch.path() + "/missing.json"), "missing.json");
}

TEST_CASE("the KV cache: a sequence read in pieces gives the logits of reading it whole") {
  manual_seed(12);
  nn::GPT2LMHeadModel model(small_config());
  model.eval();
  const Tensor ids = randint(0, 37, {3, 10});
  const Tensor whole = model.forward(ids);
  nn::GPT2Cache cache;
  std::vector<Tensor> pieces;
  for (auto [begin, length] : {std::pair<int64_t, int64_t>{0, 4}, {4, 1}, {5, 3}, {8, 2}}) {
    pieces.push_back(model.forward(ids.narrow(1, begin, length), &cache));
    CHECK(cache.length() == begin + length);
  }
  check_close(cat(pieces, 1), whole, 1e-5, 1e-5);
  CHECK_THROWS_WITH_ALL(model.forward(randint(0, 37, {3, 15}), &cache), "GPT2Model", "15 positions",
                        "after 10 cached", "n_positions 24");
  nn::GPT2Cache other;
  model.forward(randint(0, 37, {2, 3}), &other);
  CHECK_THROWS_WITH_ALL(model.forward(randint(0, 37, {3, 1}), &other), "GPT2Attention", "batch size");
}

TEST_CASE("generation with the KV cache gives the tokens generation without it gives, past n_positions too") {
  nn::GPT2LMHeadModel model(small_config());
  const Tensor prompt = tensor<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  const nn::SamplingOptions greedy = {.temperature = 0.0};
  // 5 prompt tokens + 30 new ones run past the 24 positions: both loops then read the latest 24.
  const Tensor cached = model.generate(prompt, 30, greedy, true);
  const Tensor uncached = model.generate(prompt, 30, greedy, false);
  CHECK(cached.sizes() == Shape{2, 35});
  CHECK(cached.to_vector<int64_t>() == uncached.to_vector<int64_t>());
  CHECK(model.is_training());  // the mode is restored
  const nn::SamplingOptions sampled = {.temperature = 0.9, .top_k = 10, .top_p = 0.9};
  manual_seed(5);
  const Tensor first = model.generate(prompt.select(0, 0), 12, sampled, true);
  manual_seed(5);
  const Tensor second = model.generate(prompt.select(0, 0), 12, sampled, false);
  CHECK(first.sizes() == Shape{17});
  CHECK(first.to_vector<int64_t>() == second.to_vector<int64_t>());
}

TEST_CASE("top_p keeps the smallest set of likeliest tokens reaching p, and at least the likeliest") {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (in that order of logits).
  const Tensor logits = log(tensor<double>({0.15, 0.5, 0.05, 0.3}, {1, 4}));
  std::vector<int64_t> counts(4, 0);
  manual_seed(9);
  for (int i = 0; i < 400; ++i) ++counts[nn::sample_next_token(logits, {.top_p = 0.75}).item<int64_t>()];
  CHECK(counts[0] == 0);  // 0.5 + 0.3 reach 0.75: 0.15 and 0.05 are cut
  CHECK(counts[2] == 0);
  CHECK(counts[1] > 180);
  CHECK(counts[3] > 100);
  for (int i = 0; i < 20; ++i) CHECK(nn::sample_next_token(logits, {.top_p = 0.01}).item<int64_t>() == 1);
}

TEST_CASE("a GPT-2 built from a config trains: the loss falls on a fixed batch") {
  manual_seed(13);
  nn::GPT2Config config = small_config();
  config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0;
  nn::GPT2LMHeadModel model(config);
  nn::AdamW optimizer(model.parameters(), {.lr = 1e-2});
  const Tensor batch = randint(0, 37, {4, 13});
  const Tensor inputs = batch.slice(1, std::nullopt, -1), targets = batch.slice(1, 1, std::nullopt).clone();
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    optimizer.zero_grad();
    const Tensor loss = model.loss(inputs, targets);
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < 0.3 * first);
  // Checkpointed blocks: the same loss and gradients.
  model.zero_grad();
  const Tensor plain = model.loss(inputs, targets);
  plain.backward();
  const Tensor plain_grad = model.transformer->wpe->weight.grad().clone();
  model.zero_grad();
  model.transformer->checkpoint_layers = true;
  const Tensor checkpointed = model.loss(inputs, targets);
  checkpointed.backward();
  check_close(checkpointed, plain, 1e-6, 1e-6);
  check_close(model.transformer->wpe->weight.grad(), plain_grad, 1e-6, 1e-5);
}

TEST_CASE("GPT-2's bad inputs are errors naming the model and the shapes") {
  nn::GPT2LMHeadModel model(small_config());
  CHECK_THROWS_WITH_ALL(model.forward(randn({2, 3})), "GPT2Model", "int64", "[2, 3]");
  CHECK_THROWS_WITH_ALL(model.forward(randint(0, 37, {2, 25})), "GPT2Model", "25 positions", "n_positions 24");
  CHECK_THROWS_WITH_ALL(model.forward(tensor<int64_t>({3, 37}, {1, 2})), "GPT2Model", "37");
  CHECK_THROWS_WITH_ALL(model.loss(randint(0, 37, {2, 4}), randint(0, 37, {2, 3})), "GPT2LMHeadModel", "[2, 4]",
                        "[2, 3]");
  CHECK_THROWS_WITH_ALL(model.loss(randint(0, 37, {2, 1})), "GPT2LMHeadModel", "T >= 2");
  CHECK_THROWS_WITH_ALL(model.generate(tensor<int64_t>({1, 40}, {2}), 3), "GPT2LMHeadModel", "generate", "40");
  CHECK_THROWS_WITH_ALL(model.generate(tensor<int64_t>({1}, {1}), 3, {.top_p = 0.0}), "top_p");
  CHECK_THROWS_WITH_ALL(model.generate(tensor<int64_t>({1}, {1}), 3, {.temperature = -1.0}), "temperature");
  CHECK_THROWS_WITH_ALL(model.save_pretrained("/tmp/never", kInt64), "save_pretrained", "int64");
  nn::GPT2Config uneven_heads;
  uneven_heads.n_embd = 10;
  uneven_heads.n_head = 3;
  CHECK_THROWS_WITH_ALL(nn::GPT2Model(uneven_heads), "n_embd 10", "n_head 3");
}
