// Worked example 8, "From the PyTorch tutorials to ember": each class the transformer tutorials
// define, written again in ember, next to the built-in nn module that computes the same thing.
//
//   ./build/examples/from_pytorch_tutorials [--seed S]
//
// The tutorials (see examples/README.md), one file each in this folder:
//   [000, 001] "NLP with Transformers", chapter 3: AttentionHead, MultiHeadAttention, FeedForward,
//              TransformerEncoderLayer, Embeddings, TransformerForSequenceClassification
//   [002]      "Attention Is All You Need" from scratch: InputEmbeddings, PositionalEncoding,
//              LayerNormalization, FeedForward, MultiHeadAttention, ResidualConnection,
//              EncoderBlock, DecoderBlock
//   [003, 004] einsum self-attention and the post-LN TransformerBlock; Peter Bloem's classifier
//
// For each class: a small ember Module written the way the tutorial writes it (same parts, same
// names), a run on a small input whose output shape and parameter count are checked, and, where
// ember has a built-in for it, the built-in loaded with the hand-built module's weights and
// shown to give the same output. The guide is compiled with the library, so an API change that
// breaks it breaks the build, and a behaviour change fails its checks: exit status 1.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "checks.h"
#include "common/run_main.h"
#include "ember.h"
#include "tutorials.h"

using namespace ember;

int main(int argc, char** argv) {
  CLI::App app{"From the PyTorch tutorials to ember: each tutorial class built in ember and checked"};
  uint64_t seed = 0;
  app.add_option("--seed", seed, "random seed")->check(examples::at_least(0));

  return examples::run_main(app, argc, argv, [&] {
    manual_seed(seed);
    {
      // Only forward passes below: recording a graph for backward would cost time and memory.
      NoGradGuard no_grad;
      from_pytorch_tutorials::chapter_three();
      from_pytorch_tutorials::attention_is_all_you_need();
      from_pytorch_tutorials::einsum_notebooks();
    }
    if (from_pytorch_tutorials::failed_checks > 0) {
      fmt::print(stderr, "\nerror: {} check(s) failed\n", from_pytorch_tutorials::failed_checks);
      return 1;
    }
    fmt::print("\nevery check passed\n");
    return 0;
  });
}
