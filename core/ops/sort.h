// Sorting and the k largest elements (beam search and top-k sampling use topk).
#pragma once

#include "core/dispatch.h"
#include "core/ops/reduce.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// Sorts every row of the last dim of x (contiguous) and writes the first k of each sorted row
// (k = the last size of values) to values and their positions in the row to indices (int64),
// both contiguous. Stable; NaN counts as larger than every number.
extern KernelTable<void(const Tensor& values, const Tensor& indices, const Tensor& x, bool descending)> sort;
}  // namespace kernels

// Sorted values along dim and their int64 indices (stable: ties keep their order). NaN sorts
// as the largest value. The values are differentiable, as topk's.
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
// The k largest (or smallest) elements along dim, sorted, and their indices. Values are
// differentiable.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);

}  // namespace ember
