// Choosing the next token from a language model's logits, shared by every model that
// generates text (CausalLanguageModel, GPT2LMHeadModel): greedy decoding, temperature, top-k
// and top-p (nucleus) sampling, and the checks and mode handling around a generation loop.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "nn/modules/module.h"

namespace ember::nn {

// How generate() picks each next token.
struct SamplingOptions {
  // Logits are divided by it before sampling: below 1 sharpens the distribution, above 1
  // flattens it; 0 means greedy decoding (the most likely token, no randomness).
  double temperature = 1.0;
  // When positive, only the top_k most likely tokens can be drawn; 0 keeps them all.
  int64_t top_k = 0;
  // Nucleus sampling: only the most likely tokens whose probabilities (after temperature and
  // top_k) add up to top_p can be drawn, always at least the most likely one; 1 keeps them all.
  double top_p = 1.0;
};

// Throws an Error naming `who` for a temperature that is negative or not finite, a top_k
// outside [0, vocab_size] or a top_p outside (0, 1].
void check_sampling(const SamplingOptions& sampling, int64_t vocab_size, const std::string& who);

// The checks every generate() makes on its request: prompt ids int64 [batch, T0] or [T0],
// not empty, every id in [0, vocab_size); max_new_tokens >= 0; the sampling options.
void check_generation_request(const Tensor& prompt, int64_t max_new_tokens, const SamplingOptions& sampling,
                              int64_t vocab_size, const std::string& who);

// One token per row from logits [batch, vocab_size] -> int64 [batch]. Random draws come from
// ember's generator, so manual_seed makes a sample repeatable.
Tensor sample_next_token(const Tensor& logits, const SamplingOptions& sampling);

// Puts a module in eval mode for as long as it lives, then restores the mode it had, even when
// an exception leaves the scope: what a generation loop needs (no dropout while sampling).
class EvalModeScope {
 public:
  explicit EvalModeScope(Module& module) : module_(module), was_training_(module.is_training()) { module.eval(); }
  ~EvalModeScope() { module_.train(was_training_); }
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace ember::nn
