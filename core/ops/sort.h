// Sorting and the k largest elements (beam search and top-k sampling use topk).
#pragma once

#include "core/ops/reduce.h"
#include "core/tensor.h"

namespace ember {

// Sorted values along dim and their int64 indices (stable: ties keep their order).
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
// The k largest (or smallest) elements along dim, sorted, and their indices. Values are
// differentiable.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);

}  // namespace ember
