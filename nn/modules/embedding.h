// Embedding: a table of vectors looked up by int64 ids, with an optional padding row that
// starts at zero and receives no gradient (as torch.nn.Embedding).
#pragma once

#include <optional>

#include "nn/modules/unary_module.h"

namespace ember::nn {

class Embedding : public UnaryModule {
 public:
  // weight [num_embeddings, embedding_dim] drawn from N(0, 1), the padding row zeroed.
  // padding_idx may be negative, counting from the end, as in PyTorch.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);

  // ids (int64, any shape) -> [...ids shape, embedding_dim].
  Tensor forward(const Tensor& ids) override;
  void reset_parameters();

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  // Normalised to [0, num_embeddings).
  std::optional<int64_t> padding_idx() const { return padding_idx_; }

  Tensor weight;

 private:
  std::string describe() const;
  int64_t num_embeddings_, embedding_dim_;
  std::optional<int64_t> padding_idx_;
};

}  // namespace ember::nn
