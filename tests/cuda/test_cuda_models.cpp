// The models on both devices: an encoder layer and a decoder layer (outputs and every
// parameter's gradient), then a tiny TransformerClassifier and a tiny encoder-decoder
// Transformer and a tiny GPT-2 trained for a few steps from the same initial weights, with dropout on: under
// the same seed both devices draw the same dropout masks, so losses, gradients and weights
// must agree step by step (in float64 over the whole run, in float32 from the same weights at
// each step: kTrainingDTypes says why). Decoding (greedy and beam search) must then pick the
// same tokens.
#include <cmath>
#include <memory>
#include <string_view>
#include <utility>

#include "noise_gradients.h"
#include "op_parity.h"

namespace ember::testing::cuda {
namespace {

// Float32 errors compound through a few layers, and the embedding's
// backward adds repeated ids in a different order on the GPU (atomics), so whole models are
// compared at a looser tolerance than single ops.
constexpr double kModelTolerance = 1e-3;

// Two modules built from the same seed, in `dtype`: one stays on the CPU, the other moves to the GPU.
template <class Make>
auto twins(uint64_t seed, Make make, DType dtype = kFloat32) {
  manual_seed(seed);
  auto cpu = make();
  manual_seed(seed);
  auto gpu = make();
  cpu->to(dtype);
  gpu->to(dtype);
  gpu->to(kGPU);
  return std::pair{cpu, gpu};
}

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

// Parameters the loss does not see (tests/noise_gradients.h): a softmax-invariant gradient
// must be this small against its block's on each device: 2000 times the rounding measured,
// while a backward that broke the cancellation (score gradients whose rows do not sum to zero)
// would leave one on the scale of the block's own.
constexpr double kInvariantGradient = 1e-5;

// Rounding differences between the devices do not stay small over several steps of training in
// float32. On the CPU alone, nudging the tiny encoder-decoder's weights below by a relative 1e-6
// after each step moved its gradients by up to 5% within six steps (3 SGD, 3 AdamW; 40 seeds):
// Adam gives gradient elements near zero full-size steps in whatever direction rounding picks,
// and ReLU units switch on or off. So training is compared twice: in float64 over the whole
// run, where rounding is 1e-16 and such growth stays far below the tolerance; and in float32
// one step at a time, the GPU model given the CPU model's weights before each step, so that
// every step's loss, gradients and update are compared from the same weights.
constexpr DType kTrainingDTypes[] = {kFloat64, kFloat32};

// Before a step in float32: the GPU model takes the CPU model's weights (in float64 the two run
// apart from the start).
void align_before_step(nn::Module& gpu, const nn::Module& cpu, DType dtype) {
  if (dtype == kFloat32) gpu.load_state_dict(cpu.state_dict());
}

// How far apart Adam can have moved the two copies of a softmax-invariant parameter by its
// step `count`: in float32 one step since they were made equal, in float64 all `count`; each
// step moves each copy by at most lr * adam_step_bound(count) per element, however small the
// noise that drives it.
double adam_noise_distance(DType dtype, int count, double lr) {
  const int steps_apart = dtype == kFloat32 ? 1 : count;
  return 2 * steps_apart * adam_step_bound(count) * lr;
}

double norm_of(const Tensor& t) {
  double squares = 0;
  for (double v : t.cpu().to_vector<double>()) squares += v * v;
  return std::sqrt(squares);
}

// The norm of value(p) over the parameters of the same attention block as the softmax-invariant
// `name`, the invariant ones left out: the scale that block's errors are measured against.
template <class Value>
double block_norm(const NamedParameters& params, const std::string& name, Value value) {
  const std::string block = name.substr(0, name.size() - kSoftmaxInvariant.size());
  double squares = 0;
  for (const auto& [other, param] : params) {
    if (!other.starts_with(block) || softmax_invariant(other)) continue;
    const Tensor v = value(param);
    if (v.defined()) squares += std::pow(norm_of(v), 2);
  }
  return std::sqrt(squares);
}

void check_gradients(const nn::Module& gpu, const nn::Module& cpu, const std::string& what) {
  const NamedParameters gpu_params = gpu.named_parameters(), cpu_params = cpu.named_parameters();
  REQUIRE(gpu_params.size() == cpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    const auto& [name, cpu_param] = cpu_params[i];
    const Tensor& gpu_param = gpu_params[i].second;
    CHECK(gpu_params[i].first == name);
    if (!cpu_param.grad().defined()) {
      CHECK_MESSAGE(!gpu_param.grad().defined(), what << ": " << name << " has a gradient only on CUDA");
      continue;
    }
    REQUIRE_MESSAGE(gpu_param.grad().defined(), what << ": " << name << " has no gradient on CUDA");
    if (softmax_invariant(name)) {
      // Near zero on each device, which also bounds their difference by 2e-5 of the scale.
      const double scale = block_norm(cpu_params, name, [](const Tensor& p) { return p.grad(); });
      const double cpu_norm = norm_of(cpu_param.grad()), gpu_norm = norm_of(gpu_param.grad());
      CHECK_MESSAGE(cpu_norm <= kInvariantGradient * scale,
                    what << ": grad of " << name << " on the CPU: norm " << cpu_norm << ", not zero against " << scale);
      CHECK_MESSAGE(gpu_norm <= kInvariantGradient * scale,
                    what << ": grad of " << name << " on CUDA: norm " << gpu_norm << ", not zero against " << scale);
      continue;
    }
    check_parity(gpu_param.grad(), cpu_param.grad(), kModelTolerance, what + ": grad of " + name);
  }
}

// `noise_distance`: how far apart per element the optimizer can have moved the devices' copies
// of a softmax-invariant parameter (adam_noise_distance; 0 for SGD, whose step lr * grad is as
// small as the noise gradient it is given). Such a parameter is allowed that, beside the
// relative tolerance against its block's weights; nothing tighter can be asked of a parameter
// the loss does not see.
void check_weights(const nn::Module& gpu, const nn::Module& cpu, const std::string& what,
                   double noise_distance = 0) {
  const NamedParameters gpu_params = gpu.named_parameters(), cpu_params = cpu.named_parameters();
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    const auto& [name, cpu_param] = cpu_params[i];
    const Tensor& gpu_param = gpu_params[i].second;
    if (!softmax_invariant(name)) {
      check_parity(gpu_param, cpu_param, kModelTolerance, what + ": " + name);
      continue;
    }
    const double allowed = kModelTolerance * block_norm(cpu_params, name, [](const Tensor& p) { return p; }) +
                           noise_distance * std::sqrt(static_cast<double>(cpu_param.numel()));
    const double distance = norm_of(sub(gpu_param.cpu(), cpu_param));
    CHECK_MESSAGE(distance <= allowed, what << ": " << name << ": |gpu - cpu| = " << distance << " > " << allowed);
  }
}

void check_loss(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  check_parity(gpu, cpu, kModelTolerance, what);
}

// Bool [batch, length], true on the last `padded` positions of the last row.
Tensor padding_mask(int64_t batch, int64_t length, int64_t padded) {
  const Tensor last_row = eq(arange(static_cast<double>(batch)).unsqueeze(1), static_cast<double>(batch - 1));
  const Tensor tail = ge(arange(static_cast<double>(length)).unsqueeze(0), static_cast<double>(length - padded));
  return logical_and(last_row, tail);
}

nn::TransformerLayerOptions tiny_layer(bool norm_first) {
  return {.d_model = 32, .num_heads = 4, .d_ff = 64, .dropout = 0.1, .norm_first = norm_first};
}

TEST_CASE("an encoder layer gives the same output and gradients on both devices") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  for (const bool norm_first : {false, true}) {
    INFO("norm_first " << norm_first);
    auto [cpu, gpu] =
        twins(seed, [&] { return std::make_shared<nn::TransformerEncoderLayer>(tiny_layer(norm_first)); });
    const Tensor x = randn({3, 7, 32}), mask = padding_mask(3, 7, 2), weights = randn({3, 7, 32});
    manual_seed(seed + 1);
    const Tensor cpu_out = cpu->forward(x, {.key_padding_mask = mask});
    manual_seed(seed + 1);
    const Tensor gpu_out = gpu->forward(x.to(kGPU), {.key_padding_mask = mask.to(kGPU)});
    check_parity(gpu_out, cpu_out, kModelTolerance, "encoder layer output");
    sum(mul(cpu_out, weights)).backward();
    sum(mul(gpu_out, weights.to(kGPU))).backward();
    check_gradients(*gpu, *cpu, "encoder layer");
  }
}

TEST_CASE("a decoder layer gives the same output and gradients on both devices") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  for (const bool norm_first : {false, true}) {
    INFO("norm_first " << norm_first);
    auto [cpu, gpu] =
        twins(seed, [&] { return std::make_shared<nn::TransformerDecoderLayer>(tiny_layer(norm_first)); });
    const Tensor x = randn({3, 6, 32}), memory = randn({3, 9, 32}), weights = randn({3, 6, 32});
    const Tensor target_mask = padding_mask(3, 6, 1), memory_mask = padding_mask(3, 9, 3);
    manual_seed(seed + 1);
    const Tensor cpu_out =
        cpu->forward(x, memory, {.target_key_padding_mask = target_mask, .memory_key_padding_mask = memory_mask});
    manual_seed(seed + 1);
    const Tensor gpu_out = gpu->forward(x.to(kGPU), memory.to(kGPU),
                                        {.target_key_padding_mask = target_mask.to(kGPU),
                                         .memory_key_padding_mask = memory_mask.to(kGPU)});
    check_parity(gpu_out, cpu_out, kModelTolerance, "decoder layer output");
    sum(mul(cpu_out, weights)).backward();
    sum(mul(gpu_out, weights.to(kGPU))).backward();
    check_gradients(*gpu, *cpu, "decoder layer");
  }
}

TEST_CASE("a tiny TransformerClassifier trains the same on both devices (AdamW)") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  const nn::TransformerClassifierOptions options{
      .vocab_size = 50, .max_len = 16, .num_classes = 3, .num_layers = 2, .layer = tiny_layer(true)};
  for (const DType dtype : kTrainingDTypes) {
    INFO("dtype " << dtype_name(dtype));
    auto [cpu, gpu] = twins(seed, [&] { return std::make_shared<nn::TransformerClassifier>(options); }, dtype);
    nn::AdamW cpu_optimizer(nn::weight_decay_groups(*cpu, 0.01), {.lr = 1e-3});
    nn::AdamW gpu_optimizer(nn::weight_decay_groups(*gpu, 0.01), {.lr = 1e-3});
    const Tensor ids = randint(1, 50, {4, 10}), labels = randint(0, 3, {4});
    const Tensor mask = padding_mask(4, 10, 3);
    for (int step = 0; step < 3; ++step) {
      INFO("step " << step);
      align_before_step(*gpu, *cpu, dtype);
      manual_seed(seed + 10 + step);
      const Tensor cpu_loss = cross_entropy(cpu->forward(ids, mask), labels);
      manual_seed(seed + 10 + step);
      const Tensor gpu_loss = cross_entropy(gpu->forward(ids.to(kGPU), mask.to(kGPU)), labels.to(kGPU));
      check_loss(gpu_loss, cpu_loss, "classifier loss");
      cpu_optimizer.zero_grad();
      gpu_optimizer.zero_grad();
      cpu_loss.backward();
      gpu_loss.backward();
      check_gradients(*gpu, *cpu, "classifier");
      cpu_optimizer.step();
      gpu_optimizer.step();
      check_weights(*gpu, *cpu, "classifier weights", adam_noise_distance(dtype, step + 1, cpu_optimizer.lr(0)));
    }
  }
}

TEST_CASE("a tiny encoder-decoder Transformer trains and decodes the same on both devices (SGD, then AdamW)") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  const nn::TransformerOptions options{.source_vocab_size = 40,
                                       .target_vocab_size = 40,
                                       .max_len = 16,
                                       .num_encoder_layers = 2,
                                       .num_decoder_layers = 2,
                                       .layer = tiny_layer(false)};
  // Sources and targets with padding (id 0) at the end of the last row; targets start with BOS (1).
  manual_seed(seed);
  Tensor source = randint(3, 40, {3, 8}), target = randint(3, 40, {3, 9});
  source = masked_fill(source, padding_mask(3, 8, 2), 0.0);
  target = masked_fill(target, padding_mask(3, 9, 3), 0.0);
  target.select(1, 0).fill_(1.0);
  const Tensor input = target.narrow(1, 0, 8), labels = target.narrow(1, 1, 8).contiguous();
  auto loss_of = [](nn::Transformer& model, const Tensor& source, const Tensor& input, const Tensor& labels) {
    const Tensor logits = model.forward(source, input);
    return cross_entropy(logits.reshape({-1, 40}), labels.reshape({-1}), {.ignore_index = 0});
  };
  for (const DType dtype : kTrainingDTypes) {
    INFO("dtype " << dtype_name(dtype));
    auto [cpu, gpu] = twins(seed, [&] { return std::make_shared<nn::Transformer>(options); }, dtype);
    auto train = [&](nn::Optimizer& cpu_optimizer, nn::Optimizer& gpu_optimizer, const std::string& what) {
      const bool adam = cpu_optimizer.type_name() != "SGD";
      for (int step = 0; step < 3; ++step) {
        INFO(what << " step " << step);
        align_before_step(*gpu, *cpu, dtype);
        manual_seed(seed + 20 + step);
        const Tensor cpu_loss = loss_of(*cpu, source, input, labels);
        manual_seed(seed + 20 + step);
        const Tensor gpu_loss = loss_of(*gpu, source.to(kGPU), input.to(kGPU), labels.to(kGPU));
        check_loss(gpu_loss, cpu_loss, what + " loss");
        cpu_optimizer.zero_grad();
        gpu_optimizer.zero_grad();
        cpu_loss.backward();
        gpu_loss.backward();
        check_gradients(*gpu, *cpu, what);
        cpu_optimizer.step();
        gpu_optimizer.step();
        check_weights(*gpu, *cpu, what + " weights",
                      adam ? adam_noise_distance(dtype, step + 1, cpu_optimizer.lr(0)) : 0.0);
      }
    };
    {
      nn::SGD cpu_optimizer(cpu->parameters(), {.lr = 0.05, .momentum = 0.9});
      nn::SGD gpu_optimizer(gpu->parameters(), {.lr = 0.05, .momentum = 0.9});
      train(cpu_optimizer, gpu_optimizer, "transformer, SGD");
    }
    {
      nn::AdamW cpu_optimizer(cpu->parameters(), {.lr = 1e-3});
      nn::AdamW gpu_optimizer(gpu->parameters(), {.lr = 1e-3});
      train(cpu_optimizer, gpu_optimizer, "transformer, AdamW");
    }
    // Decoding from the same weights picks the same tokens.
    align_before_step(*gpu, *cpu, dtype);
    cpu->eval();
    gpu->eval();
    const nn::DecodeOptions greedy{.max_length = 6, .beam_size = 1};
    CHECK(gpu->greedy_decode(source.to(kGPU), greedy) == cpu->greedy_decode(source, greedy));
    const nn::DecodeOptions beam{.max_length = 6, .beam_size = 3};
    CHECK(gpu->beam_search(source.to(kGPU), beam) == cpu->beam_search(source, beam));
  }
}

TEST_CASE("a tiny GPT-2 trains and generates the same on both devices (SGD), its chunked loss included") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  nn::GPT2Config config;
  config.vocab_size = 50;
  config.n_positions = 16;
  config.n_embd = 32;
  config.n_layer = 2;
  config.n_head = 4;
  // SGD rather than AdamW: the keys' third of c_attn.bias gets only rounding noise for a gradient
  // (softmax does not see it), which Adam would turn into full-size steps apart on the devices.
  for (const DType dtype : kTrainingDTypes) {
    INFO("dtype " << dtype_name(dtype));
    auto [cpu, gpu] = twins(seed, [&] { return std::make_shared<nn::GPT2LMHeadModel>(config); }, dtype);
    // Several chunks of the output layer and a ragged last one: 3 x 12 positions in 7s.
    cpu->loss_chunk_rows = gpu->loss_chunk_rows = 7;
    nn::SGD cpu_optimizer(cpu->parameters(), {.lr = 0.1});
    nn::SGD gpu_optimizer(gpu->parameters(), {.lr = 0.1});
    const Tensor window = randint(0, 50, {3, 13});
    const Tensor ids = window.slice(1, std::nullopt, -1).contiguous();
    const Tensor targets = window.slice(1, 1, std::nullopt).contiguous();
    for (int step = 0; step < 3; ++step) {
      INFO("step " << step);
      align_before_step(*gpu, *cpu, dtype);
      manual_seed(seed + 10 + step);
      const Tensor cpu_loss = cpu->loss(ids, targets);
      manual_seed(seed + 10 + step);
      const Tensor gpu_loss = gpu->loss(ids.to(kGPU), targets.to(kGPU));
      check_loss(gpu_loss, cpu_loss, "GPT-2 loss");
      cpu_optimizer.zero_grad();
      gpu_optimizer.zero_grad();
      cpu_loss.backward();
      gpu_loss.backward();
      check_gradients(*gpu, *cpu, "GPT-2");
      cpu_optimizer.step();
      gpu_optimizer.step();
      check_weights(*gpu, *cpu, "GPT-2 weights");
    }
    // Greedy generation through the KV cache picks the same tokens on both devices.
    const Tensor prompt = randint(0, 50, {2, 4});
    const Tensor cpu_tokens = cpu->generate(prompt, 8, {.temperature = 0.0});
    const Tensor gpu_tokens = gpu->generate(prompt.to(kGPU), 8, {.temperature = 0.0});
    CHECK(gpu_tokens.cpu().to_vector<int64_t>() == cpu_tokens.to_vector<int64_t>());
  }
}

TEST_CASE("Module::to moves gradients, and the optimizer's state follows its parameters") {
  manual_seed(fresh_seed());
  auto model = std::make_shared<nn::Linear>(8, 4);
  nn::AdamW optimizer(model->parameters(), {.lr = 1e-2});
  sum(model->forward(randn({3, 8}))).backward();
  optimizer.step();  // creates the moments on the CPU
  model->to(kGPU);
  for (const Tensor& p : model->parameters()) {
    CHECK(p.is_cuda());
    REQUIRE(p.grad().defined());
    CHECK(p.grad().is_cuda());
  }
  optimizer.to_parameter_devices();
  for (const auto& [name, value] : optimizer.state_dict()) {
    if (name.starts_with("state.") && !name.ends_with(".step")) CHECK_MESSAGE(value.is_cuda(), name);
  }
  optimizer.step();  // on the GPU now, with the moved state
  CHECK(all(isfinite(model->weight.cpu())).item<bool>());
}

}  // namespace
}  // namespace ember::testing::cuda
