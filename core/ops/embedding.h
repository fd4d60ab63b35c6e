// Embedding lookup: rows of a weight table picked by int64 ids. The backward scatter-adds into
// the rows used; the padding_idx row gets no gradient.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace ember {

// weight [num_embeddings, dim], ids of any shape -> [...ids shape, dim]. An id outside
// [0, num_embeddings) throws naming the id.
Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace ember
