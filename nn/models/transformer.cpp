// The encoder-decoder transformer and its decoding.
#include "nn/models/transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/autograd/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/join.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"
#include "core/ops/sort.h"
#include "core/ops/views.h"

namespace ember::nn {
namespace {

// Switches a module to eval mode for a scope and restores its previous mode after.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& module) : module_(module), was_training_(module.is_training()) { module.eval(); }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace

Transformer::Transformer(const TransformerOptions& options) : Module("Transformer"), options_(options) {
  const int64_t d_model = options.layer.d_model;
  EMBER_CHECK(!options.share_embeddings || options.source_vocab_size == options.target_vocab_size,
              "Transformer: shared embeddings need equal vocabularies, got source {} and target {}",
              options.source_vocab_size, options.target_vocab_size);
  std::optional<int64_t> padding_idx;
  if (options.pad_id >= 0) padding_idx = options.pad_id;
  source_embedding = register_module(
      "source_embedding", std::make_shared<TokenEmbedding>(options.source_vocab_size, d_model,
                                                           options.scale_embeddings, padding_idx));
  target_embedding = options.share_embeddings
                         ? source_embedding
                         : std::make_shared<TokenEmbedding>(options.target_vocab_size, d_model,
                                                            options.scale_embeddings, padding_idx);
  // A shared table is registered under both names, as PyTorch lists tied weights in its state
  // dict; parameters() still holds it once.
  register_module("target_embedding", target_embedding);
  if (options.positions == Positions::Sinusoidal) {
    positions = register_module("positions", std::make_shared<SinusoidalPositionalEncoding>(d_model, options.max_len));
  } else {
    positions = register_module("positions", std::make_shared<LearnedPositionalEmbedding>(options.max_len, d_model));
  }
  dropout = register_module("dropout", std::make_shared<Dropout>(options.layer.dropout));
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(options.layer, options.num_encoder_layers,
                                                                           options.final_norm));
  decoder = register_module("decoder", std::make_shared<TransformerDecoder>(options.layer, options.num_decoder_layers,
                                                                           options.final_norm));
  if (!options.tie_output) {
    output_projection = register_module("output_projection", std::make_shared<Linear>(d_model, options.target_vocab_size));
  }
}

Tensor Transformer::padding_mask(const Tensor& ids) const {
  return options_.pad_id >= 0 ? eq(ids, static_cast<double>(options_.pad_id)) : Tensor();
}

Tensor Transformer::embed(TokenEmbedding& embedding, const Tensor& ids, const char* what, int64_t offset) {
  EMBER_CHECK(ids.defined() && ids.dim() == 2 && ids.dtype() == kInt64,
              "Transformer: expected {} ids as int64 [batch, length], got {} {}", what,
              ids.defined() ? dtype_name(ids.dtype()) : "undefined", ids.defined() ? shape_str(ids.sizes()) : "");
  return dropout->forward(positions->forward(embedding.forward(ids), offset));
}

Tensor Transformer::project(const Tensor& hidden) {
  if (output_projection) return output_projection->forward(hidden);
  return linear(hidden, target_embedding->embedding->weight);
}

Tensor Transformer::encode(const Tensor& source) {
  return encoder->forward(embed(*source_embedding, source, "source"), {.key_padding_mask = padding_mask(source)});
}

Tensor Transformer::decode(const Tensor& target, const Tensor& memory, const Tensor& source) {
  DecoderMasks masks;
  masks.target_key_padding_mask = padding_mask(target);
  masks.memory_key_padding_mask = padding_mask(source);
  return project(decoder->forward(embed(*target_embedding, target, "target"), memory, masks));
}

Tensor Transformer::forward(const Tensor& source, const Tensor& target) {
  return decode(target, encode(source), source);
}

Tensor Transformer::decode_step(const Tensor& tokens, int64_t step, const Tensor& memory, const Tensor& source,
                                DecoderCache& cache) {
  EMBER_CHECK(tokens.defined() && tokens.dtype() == kInt64 &&
                  (tokens.dim() == 1 || (tokens.dim() == 2 && tokens.size(1) == 1)),
              "Transformer: decode_step expects the newest tokens as int64 [batch] or [batch, 1], got {} {}",
              tokens.defined() ? dtype_name(tokens.dtype()) : "undefined",
              tokens.defined() ? shape_str(tokens.sizes()) : "");
  EMBER_CHECK(step == cache.length(), "Transformer: decode_step at step {} but the cache holds {} positions", step,
              cache.length());
  const Tensor ids = tokens.dim() == 1 ? tokens.unsqueeze(1) : tokens;
  if (options_.pad_id >= 0) {
    const Tensor padding = padding_mask(ids);
    cache.target_key_padding_mask =
        step == 0 ? padding : cat({cache.target_key_padding_mask, padding}, 1);
  }
  DecoderMasks masks;
  masks.target_key_padding_mask = cache.target_key_padding_mask;
  masks.memory_key_padding_mask = padding_mask(source);
  const Tensor hidden = decoder->forward_step(embed(*target_embedding, ids, "target", step), memory, cache, masks);
  return project(hidden).select(1, 0);
}

void Transformer::check_decode_options(const DecodeOptions& options) const {
  EMBER_CHECK(options.beam_size >= 1, "Transformer: beam_size must be at least 1, got {}", options.beam_size);
  EMBER_CHECK(options.max_length >= 1 && options.max_length < options_.max_len,
              "Transformer: max_length must be in [1, {}), got {}", options_.max_len, options.max_length);
  for (int64_t id : {options.bos_id, options.eos_id}) {
    EMBER_CHECK(id >= 0 && id < options_.target_vocab_size,
                "Transformer: BOS/EOS id {} is outside the target vocabulary of {}", id, options_.target_vocab_size);
  }
}

std::vector<std::vector<int64_t>> Transformer::greedy_decode(const Tensor& source, const DecodeOptions& options) {
  check_decode_options(options);
  EvalModeGuard eval_mode(*this);
  NoGradGuard no_grad;
  const Tensor memory = encode(source);
  const int64_t batch = source.size(0);
  Tensor target = full_int64({batch, 1}, options.bos_id, TensorOptions(kInt64).device(source.device()));
  std::vector<std::vector<int64_t>> outputs(batch);
  std::vector<bool> finished(batch, false);
  DecoderCache cache;
  for (int64_t step = 0; step < options.max_length; ++step) {
    const Tensor logits = options.use_cache ? decode_step(target.select(1, -1), step, memory, source, cache)
                                            : decode(target, memory, source).select(1, -1);  // [batch, vocab]
    const Tensor next = argmax(logits, -1);
    const std::vector<int64_t> tokens = next.to_vector<int64_t>();
    bool all_done = true;
    for (int64_t b = 0; b < batch; ++b) {
      if (finished[b]) continue;
      if (tokens[b] == options.eos_id) {
        finished[b] = true;
      } else {
        outputs[b].push_back(tokens[b]);
        all_done = false;
      }
    }
    if (all_done) break;
    // Only the uncached path reads more than the newest token.
    target = options.use_cache ? next.unsqueeze(1) : cat({target, next.unsqueeze(1)}, 1);
  }
  return outputs;
}

std::vector<std::vector<int64_t>> Transformer::beam_search(const Tensor& source, const DecodeOptions& options) {
  check_decode_options(options);
  EvalModeGuard eval_mode(*this);
  NoGradGuard no_grad;
  const int64_t batch = source.size(0), beams = options.beam_size, vocab = options_.target_vocab_size;
  const int64_t length = source.size(1);

  // Every sequence's memory and source repeated once per beam: row b * beams + k.
  const Tensor memory = encode(source);
  const Tensor beam_memory = memory.unsqueeze(1).expand({batch, beams, length, memory.size(2)})
                                 .reshape({batch * beams, length, memory.size(2)});
  const Tensor beam_source = source.unsqueeze(1).expand({batch, beams, length}).reshape({batch * beams, length});

  struct Hypothesis {
    std::vector<int64_t> tokens;
    double score;  // sum of log-probabilities
    int64_t row = 0;  // the decoder row whose cache holds this hypothesis's prefix
  };
  auto normalized = [&](const Hypothesis& h) {
    return h.score / std::pow(static_cast<double>(h.tokens.size() + 1), options.length_penalty);
  };
  // Live beams per sequence; at the start one beam (the others would only duplicate it).
  std::vector<std::vector<Hypothesis>> live(batch, std::vector<Hypothesis>{Hypothesis{{}, 0.0}});
  // The best `beams` finished hypotheses of each sequence, by normalized score.
  std::vector<std::vector<Hypothesis>> finished(batch);
  std::vector<bool> is_done(batch, false);
  auto done = [&](int64_t b) { return static_cast<bool>(is_done[b]); };
  auto add_finished = [&](int64_t b, Hypothesis hypothesis) {
    std::vector<Hypothesis>& kept = finished[b];
    kept.push_back(std::move(hypothesis));
    if (static_cast<int64_t>(kept.size()) > beams) {
      kept.erase(std::min_element(kept.begin(), kept.end(), [&](const Hypothesis& x, const Hypothesis& y) {
        return normalized(x) < normalized(y);
      }));
    }
  };
  // A sequence is done when it has `beams` finished hypotheses and its best live one already
  // has a lower log-probability than all of them: log-probabilities only fall as a hypothesis
  // grows, so (ranked by log-probability) no live beam can overtake them. With one beam this
  // stops exactly where greedy search does.
  auto update_done = [&](int64_t b) {
    if (static_cast<int64_t>(finished[b].size()) < beams) return;
    double worst_finished = 0;
    for (const Hypothesis& h : finished[b]) worst_finished = std::min(worst_finished, h.score);
    is_done[b] = live[b].empty() || live[b].front().score < worst_finished;
  };

  // Live hypothesis k of sequence b is fed on row b * beams + k. Rows past a sequence's live
  // beams repeat its last one; rows of finished sequences hold padding (their output is not
  // read).
  auto hypothesis_on_row = [&](int64_t b, int64_t k) -> const Hypothesis* {
    if (done(b) || live[b].empty()) return nullptr;
    return &live[b][std::min<size_t>(k, live[b].size() - 1)];
  };
  const int64_t padding = std::max<int64_t>(options_.pad_id, 0);
  DecoderCache cache;  // with use_cache: row r holds the prefix of the hypothesis fed on row r

  for (int64_t step = 0; step < options.max_length; ++step) {
    Tensor logits;  // [batch * beams, vocab]
    if (options.use_cache) {
      // Each row's newest token: BOS first, then the last token of its hypothesis.
      std::vector<int64_t> newest(batch * beams, step == 0 ? options.bos_id : padding);
      for (int64_t b = 0; step > 0 && b < batch; ++b) {
        for (int64_t k = 0; k < beams; ++k) {
          if (const Hypothesis* h = hypothesis_on_row(b, k)) newest[b * beams + k] = h->tokens.back();
        }
      }
      logits = decode_step(tensor(newest, {batch * beams}).to(source.device()), step, beam_memory, beam_source, cache);
    } else {
      // The whole prefix of every row: BOS, then its hypothesis's tokens.
      std::vector<int64_t> rows(batch * beams * (step + 1), padding);
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t k = 0; k < beams; ++k) {
          int64_t* row = rows.data() + (b * beams + k) * (step + 1);
          row[0] = options.bos_id;
          if (const Hypothesis* h = hypothesis_on_row(b, k)) std::copy(h->tokens.begin(), h->tokens.end(), row + 1);
        }
      }
      const Tensor target = tensor(rows, {batch * beams, step + 1}).to(source.device());
      logits = decode(target, beam_memory, beam_source).select(1, -1);
    }
    const Tensor log_probs = log_softmax(logits, -1);
    // The 2 * beams best continuations of each row are enough: at most `beams` of them end.
    const ValuesIndices best = topk(log_probs, std::min<int64_t>(2 * beams, vocab), -1);
    const std::vector<double> values = best.values.to_vector<double>();
    const std::vector<int64_t> indices = best.indices.to_vector<int64_t>();
    const int64_t width = best.values.size(1);

    for (int64_t b = 0; b < batch; ++b) {
      if (done(b)) continue;
      std::vector<std::pair<Hypothesis, bool>> candidates;  // (extended hypothesis, ends with EOS)
      for (size_t k = 0; k < live[b].size(); ++k) {
        const int64_t row = b * beams + static_cast<int64_t>(k);
        for (int64_t j = 0; j < width; ++j) {
          Hypothesis next = live[b][k];
          next.score += values[row * width + j];
          next.row = row;
          const int64_t token = indices[row * width + j];
          const bool ends = token == options.eos_id;
          if (!ends) next.tokens.push_back(token);
          candidates.emplace_back(std::move(next), ends);
        }
      }
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const auto& x, const auto& y) { return x.first.score > y.first.score; });
      // Take candidates best first: an ending one finishes a hypothesis, any other extends the
      // beam, until the beam is full. (Ending candidates ranked below a full beam are dropped.)
      std::vector<Hypothesis> next_live;
      for (auto& [hypothesis, ends] : candidates) {
        if (ends) {
          add_finished(b, std::move(hypothesis));
        } else {
          next_live.push_back(std::move(hypothesis));
          if (static_cast<int64_t>(next_live.size()) == beams) break;
        }
      }
      live[b] = std::move(next_live);
      update_done(b);
    }
    bool all_done = true;
    for (int64_t b = 0; b < batch; ++b) all_done = all_done && done(b);
    if (all_done) break;
    if (options.use_cache) {
      // Each row's cache must hold the prefix of the hypothesis it is fed next: copy the
      // self-attention caches from the rows the surviving hypotheses came from. Every beam of
      // a sequence attends to the same memory, so the cross-attention caches stay.
      std::vector<int64_t> parents(batch * beams);
      for (int64_t r = 0; r < batch * beams; ++r) parents[r] = r;
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t k = 0; k < beams; ++k) {
          if (const Hypothesis* h = hypothesis_on_row(b, k)) parents[b * beams + k] = h->row;
        }
      }
      cache.reorder(tensor(parents, {batch * beams}).to(source.device()));
    }
  }

  std::vector<std::vector<int64_t>> outputs(batch);
  for (int64_t b = 0; b < batch; ++b) {
    // Sequences that reached max_length without EOS compete with the finished ones.
    std::vector<Hypothesis> pool = finished[b];
    if (!done(b)) pool.insert(pool.end(), live[b].begin(), live[b].end());
    if (pool.empty()) continue;
    const auto best = std::max_element(pool.begin(), pool.end(), [&](const Hypothesis& x, const Hypothesis& y) {
      return normalized(x) < normalized(y);
    });
    outputs[b] = best->tokens;
  }
  return outputs;
}

}  // namespace ember::nn
