// The encoder-decoder transformer of "Attention Is All You Need": source and target token
// embeddings (optionally one table for both) scaled by sqrt(d_model) plus positions, an
// encoder stack, a decoder stack, and a projection to the target vocabulary (optionally tied
// to the target embedding). Decodes by greedy search or batched beam search, incrementally
// (each step runs only the newest token through the decoder, with cached keys and values) or
// by re-running the whole prefix.
#pragma once

#include <memory>
#include <vector>

#include "nn/modules/dropout.h"
#include "nn/modules/linear.h"
#include "nn/modules/module.h"
#include "nn/modules/positional.h"
#include "nn/models/transformer_layers.h"
#include "nn/modules/unary_module.h"

namespace ember::nn {

enum class Positions { Sinusoidal, Learned };

struct TransformerOptions {
  int64_t source_vocab_size = 8000;
  int64_t target_vocab_size = 8000;
  bool share_embeddings = false;  // one table for source and target (needs equal vocabularies)
  bool tie_output = false;        // the output projection reuses the target embedding table
  int64_t max_len = 512;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  TransformerLayerOptions layer;
  Positions positions = Positions::Sinusoidal;
  bool scale_embeddings = true;  // multiply token embeddings by sqrt(d_model)
  bool final_norm = true;        // a LayerNorm after each stack, as torch.nn.Transformer
  int64_t pad_id = 0;            // source and target positions holding it are masked out; -1 for none
};

struct DecodeOptions {
  int64_t bos_id = 1;  // the token each target sequence starts with
  int64_t eos_id = 2;  // generation stops at it
  int64_t max_length = 64;  // at most this many generated tokens
  int64_t beam_size = 4;
  // Finished hypotheses are ranked by log-probability / length^length_penalty: above 0 favours
  // longer outputs, 0 ranks by log-probability alone.
  double length_penalty = 1.0;
  // Decode incrementally through decode_step and a DecoderCache; false re-runs the decoder on
  // the whole prefix every step (same tokens, far slower; kept for comparison).
  bool use_cache = true;
};

// Submodules: source_embedding, target_embedding (the same module when shared), positions,
// dropout, encoder, decoder, output_projection (absent when tied).
class Transformer : public Module {
 public:
  explicit Transformer(const TransformerOptions& options);

  // source ids int64 [batch, S] -> memory [batch, S, d_model]
  Tensor encode(const Tensor& source);
  // target ids int64 [batch, T] (starting with BOS) and the encoder's memory -> logits
  // [batch, T, target_vocab]; position t predicts target token t + 1. `source` gives the
  // memory's padding mask.
  Tensor decode(const Tensor& target, const Tensor& memory, const Tensor& source);
  Tensor forward(const Tensor& source, const Tensor& target);
  // One incremental decoding step: the newest target token of each row, int64 [batch] or
  // [batch, 1], at position `step` (0 for BOS), after the `step` positions already in `cache`
  // (empty at step 0) -> the next token's logits [batch, target_vocab], equal to decode()'s
  // last position over the whole prefix. Appends the token to the cache.
  Tensor decode_step(const Tensor& tokens, int64_t step, const Tensor& memory, const Tensor& source,
                     DecoderCache& cache);

  // The most likely next token at each step, for every sequence of the batch at once. Returns
  // each sequence's generated tokens, without BOS and EOS.
  std::vector<std::vector<int64_t>> greedy_decode(const Tensor& source, const DecodeOptions& options = {});
  // Beam search over every sequence of the batch at once; with beam_size 1 it is greedy search.
  std::vector<std::vector<int64_t>> beam_search(const Tensor& source, const DecodeOptions& options = {});

  const TransformerOptions& options() const { return options_; }

  std::shared_ptr<TokenEmbedding> source_embedding, target_embedding;
  std::shared_ptr<PositionalModule> positions;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
  std::shared_ptr<Linear> output_projection;  // null when tied

 private:
  Tensor padding_mask(const Tensor& ids) const;
  Tensor embed(TokenEmbedding& embedding, const Tensor& ids, const char* what, int64_t offset = 0);
  Tensor project(const Tensor& hidden);
  void check_decode_options(const DecodeOptions& options) const;
  TransformerOptions options_;
};

}  // namespace ember::nn
