// GPT2Config: the keys of a Hugging Face GPT-2 config.json that shape the network, read with
// checks that name the file and the key, and written back as Hugging Face reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nn/modules/activation.h"

namespace ember::nn {

// The defaults are GPT-2 small (124M parameters), as the published `gpt2` checkpoint's config.
struct GPT2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // the longest context: the rows of the position table
  int64_t n_embd = 768;        // the width of every block
  int64_t n_layer = 12;
  int64_t n_head = 12;
  std::optional<int64_t> n_inner;  // the MLP's hidden width; 4 * n_embd when absent or null
  // "gelu_new" (GPT-2's tanh form), "gelu_pytorch_tanh", "gelu" or "relu", kept as written.
  std::string activation_function = "gelu_new";
  double resid_pdrop = 0.1;  // after each block's attention and MLP, before the residual add
  double embd_pdrop = 0.1;   // on the sum of the token and position embeddings
  double attn_pdrop = 0.1;   // on the attention weights
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;  // the std of the initial weights (when not loaded)
  bool tie_word_embeddings = true;  // the output layer reuses the token embedding's table
  int64_t bos_token_id = 50256;
  int64_t eos_token_id = 50256;  // "<|endoftext|>", which also separates documents

  // The MLP's hidden width.
  int64_t inner_size() const { return n_inner.value_or(4 * n_embd); }
  int64_t head_dim() const { return n_embd / n_head; }
  Activation activation() const { return activation_from_name(activation_function, "activation_function"); }

  // Reads a config.json; a missing or null key keeps its default. A path that is not a regular
  // file, a key of the wrong type (a size that is not a JSON integer), or a variant ember does
  // not build (cross-attention, attention scaled by layer index, unscaled attention) is an
  // Error naming the file and the key.
  static GPT2Config from_json_file(const std::string& path);
  // Throws when the sizes do not fit together (n_embd not divisible by n_head, ...).
  void check() const;
  // Writes the keys above as a config.json that Hugging Face's GPT2Config reads too (atomically).
  // `torch_dtype` ("float32", "bfloat16", "float16") says in which dtype the weights were saved.
  void to_json_file(const std::string& path, const std::string& torch_dtype = "float32") const;
};

}  // namespace ember::nn
