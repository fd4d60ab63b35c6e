// Embedding: the weight table, its initialisation and the checked lookup.
#include "nn/modules/embedding.h"

#include "core/autograd/grad_mode.h"
#include "core/ops/embedding.h"
#include "core/ops/factory.h"
#include "nn/modules/init.h"

namespace ember::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx)
    : UnaryModule("Embedding"), num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  EMBER_CHECK(num_embeddings > 0 && embedding_dim > 0,
              "{}: num_embeddings and embedding_dim must be positive", describe());
  if (padding_idx) {
    EMBER_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings,
                "{}: padding_idx {} is out of range [{}, {})", describe(), *padding_idx, -num_embeddings,
                num_embeddings);
    padding_idx_ = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

std::string Embedding::describe() const {
  return fmt::format("Embedding(num_embeddings={}, embedding_dim={})", num_embeddings_, embedding_dim_);
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (padding_idx_) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx_).zero_();
  }
}

Tensor Embedding::forward(const Tensor& ids) {
  EMBER_CHECK(ids.defined(), "{}: ids are undefined", describe());
  EMBER_CHECK(ids.dtype() == kInt64, "{}: expected int64 ids, got {} of shape {}", describe(), ids.dtype(),
              shape_str(ids.sizes()));
  try {
    return embedding(weight, ids, padding_idx_);
  } catch (const Error& error) {
    // An id out of range is found by the op; say which module was given it.
    fail("{}: {}", describe(), error.what());
  }
}

}  // namespace ember::nn
