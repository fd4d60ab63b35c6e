// Peak resident memory and step time trained with and without activation checkpointing: a stack
// of encoder layers (d_model 256, 4 heads, d_ff 1024, dropout 0.1, batch 8) with
// autograd::checkpoint around each layer, or the encoder-decoder nn::Transformer of the same
// sizes with checkpoint_layers on both stacks. Peak memory is per process, so each mode runs in
// its own:
//
//   OMP_NUM_THREADS=1 ./build/benchmarks/activation_checkpoint_memory plain [layers] [length] [stack|encoder-decoder]
//   OMP_NUM_THREADS=1 ./build/benchmarks/activation_checkpoint_memory checkpoint [layers] [length] [stack|encoder-decoder]
//
// Both print the loss of the same seeded step, which must agree (dropout draws the same masks).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ember.h"
#include "nn/models/transformer_layers.h"
using namespace ember;

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

// The encoder-decoder: `layers` layers on each side, source and target of `length` tokens.
int encoder_decoder(bool checkpointed, int layers, int64_t length) {
  manual_seed(0);
  nn::TransformerOptions options;
  options.source_vocab_size = options.target_vocab_size = 1000;
  options.max_len = length + 1;
  options.num_encoder_layers = options.num_decoder_layers = layers;
  options.layer = {.d_model = 256, .num_heads = 4, .d_ff = 1024, .dropout = 0.1};
  nn::Transformer model(options);
  model.encoder->checkpoint_layers = model.decoder->checkpoint_layers = checkpointed;
  const Tensor source = randint(1, 1000, {8, length}), target = randint(1, 1000, {8, length + 1});
  double best = 1e9, loss_value = 0;
  for (int step = 0; step < 3; ++step) {
    const auto start = std::chrono::steady_clock::now();
    manual_seed(1);
    const Tensor logits = model.forward(source, target.narrow(1, 0, length));
    const Tensor loss = cross_entropy(logits.reshape({-1, 1000}), target.narrow(1, 1, length).reshape({-1}));
    loss.backward();
    loss_value = loss.item<double>();
    model.zero_grad();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("%s: encoder-decoder, %d + %d layers, batch 8, length %lld, d_model 256: loss %.9f, best step %.3f s, "
              "peak RSS %.1f MiB\n",
              checkpointed ? "checkpoint" : "plain", layers, layers, static_cast<long long>(length), loss_value, best,
              peak_rss_mib());
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2 || (std::string(argv[1]) != "plain" && std::string(argv[1]) != "checkpoint")) {
    std::fprintf(stderr, "usage: %s plain|checkpoint [layers] [length]\n", argv[0]);
    return 1;
  }
  const bool checkpointed = std::string(argv[1]) == "checkpoint";
  const int layers = argc > 2 ? std::stoi(argv[2]) : 6;
  const int64_t length = argc > 3 ? std::stoll(argv[3]) : 512;
  if (argc > 4 && std::string(argv[4]) == "encoder-decoder") return encoder_decoder(checkpointed, layers, length);
  manual_seed(0);
  nn::TransformerLayerOptions options{.d_model = 256, .num_heads = 4, .d_ff = 1024, .dropout = 0.1};
  std::vector<std::shared_ptr<nn::TransformerEncoderLayer>> stack;
  for (int i = 0; i < layers; ++i) stack.push_back(std::make_shared<nn::TransformerEncoderLayer>(options));
  const Tensor x = randn({8, length, 256});
  double best = 1e9, loss_value = 0;
  for (int step = 0; step < 3; ++step) {
    const auto start = std::chrono::steady_clock::now();
    manual_seed(1);
    Tensor h = x;
    for (auto& layer : stack) {
      if (checkpointed) {
        Tensor input = h;
        if (!input.requires_grad()) { input = input.detach(); input.requires_grad_(); }
        h = autograd::checkpoint([&layer](const std::vector<Tensor>& in) { return layer->forward(in[0]); }, {input});
      } else {
        h = layer->forward(h);
      }
    }
    const Tensor loss = mean(mul(h, h));
    loss.backward();
    loss_value = loss.item<double>();
    for (auto& layer : stack) layer->zero_grad();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("%s: %d layers, batch 8, length %lld, d_model 256: loss %.9f, best step %.3f s, peak RSS %.1f MiB\n",
              checkpointed ? "checkpoint" : "plain", layers, static_cast<long long>(length), loss_value, best,
              usage.ru_maxrss / 1024.0);
}
