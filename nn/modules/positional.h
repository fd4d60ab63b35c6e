// Position information for token embeddings: fixed sinusoids ("Attention Is All You Need"),
// learned position vectors, and the token embedding scaled by sqrt(d_model) that they are
// added to.
#pragma once

#include <optional>

#include "nn/modules/embedding.h"

namespace ember::nn {

// A module adding position information to [batch, seq_len, d_model] inputs. forward(x, offset)
// treats x as positions offset .. offset + seq_len - 1, so incremental decoding can add the
// encoding of one new position; forward(x) is forward(x, 0).
class PositionalModule : public UnaryModule {
 public:
  using UnaryModule::UnaryModule;
  Tensor forward(const Tensor& x) override;
  virtual Tensor forward(const Tensor& x, int64_t offset) = 0;
};

// pe[pos, 2i] = sin(pos / 10000^(2i / d_model)), pe[pos, 2i + 1] = cos(pos / 10000^(2i / d_model)),
// held in the buffer "pe" [max_len, d_model]: saved with the model, moved by to(), not trained.
class SinusoidalPositionalEncoding : public PositionalModule {
 public:
  SinusoidalPositionalEncoding(int64_t d_model, int64_t max_len = 5000);

  // x [batch, seq_len, d_model] -> x + pe[offset:offset + seq_len]; offset + seq_len must not
  // exceed max_len.
  using PositionalModule::forward;
  Tensor forward(const Tensor& x, int64_t offset) override;

  int64_t d_model() const { return d_model_; }
  int64_t max_len() const { return max_len_; }

  Tensor pe;

 private:
  int64_t d_model_, max_len_;
};

// One trained vector per position: the parameter "weight" [max_len, d_model], drawn from
// N(0, 1) as an nn.Embedding(max_len, d_model) would be.
class LearnedPositionalEmbedding : public PositionalModule {
 public:
  LearnedPositionalEmbedding(int64_t max_len, int64_t d_model);

  // x [batch, seq_len, d_model] -> x + weight[offset:offset + seq_len]; offset + seq_len must
  // not exceed max_len.
  using PositionalModule::forward;
  Tensor forward(const Tensor& x, int64_t offset) override;

  int64_t max_len() const { return max_len_; }
  int64_t d_model() const { return d_model_; }

  Tensor weight;

 private:
  int64_t max_len_, d_model_;
};

// Token ids -> vectors, multiplied by sqrt(d_model) when scale_by_sqrt_d_model (as in the
// paper, so the embeddings are not drowned by the positional encoding they are added to). The
// table is the submodule "embedding" (parameter "embedding.weight").
class TokenEmbedding : public UnaryModule {
 public:
  TokenEmbedding(int64_t vocab_size, int64_t d_model, bool scale_by_sqrt_d_model = true,
                 std::optional<int64_t> padding_idx = std::nullopt);

  // ids (int64) [batch, seq_len] -> [batch, seq_len, d_model].
  Tensor forward(const Tensor& ids) override;

  int64_t d_model() const { return d_model_; }
  bool scale_by_sqrt_d_model() const { return scale_by_sqrt_d_model_; }

  std::shared_ptr<Embedding> embedding;

 private:
  int64_t d_model_;
  bool scale_by_sqrt_d_model_;
};

}  // namespace ember::nn
