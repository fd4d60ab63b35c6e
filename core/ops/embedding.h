// Embedding lookup: rows of a weight table picked by int64 ids. The backward scatter-adds into
// the rows used; the padding_idx row gets no gradient.
#pragma once

#include <optional>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// out [count, dim] = weight rows picked by ids [count] (all contiguous, ids in range).
extern KernelTable<void(const Tensor& out, const Tensor& weight, const Tensor& ids)> embedding;
// Scatter-adds grad_out rows into a zeroed grad_weight, skipping padding_idx (-1 for none).
extern KernelTable<void(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& ids, int64_t padding_idx)>
    embedding_backward;
}  // namespace kernels

// weight [num_embeddings, dim], ids of any shape -> [...ids shape, dim]. An id outside
// [0, num_embeddings) throws naming the id.
Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace ember
