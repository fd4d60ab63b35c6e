// Selecting by index or mask, and the triangular masks attention uses.
#pragma once

#include "core/tensor.h"

namespace ember {

// Rows (along dim) picked by a 1-D int64 index; the backward scatter-adds.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j] = x[index[i][j]][j] for dim 0 (and so on), index int64 of the same rank as x.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with `value` wherever the bool mask (broadcast to x's shape) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// a where the bool condition holds, b elsewhere; all three broadcast together.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, double b);
// The lower (upper) triangle of the last two dims: elements with j - i <= diagonal
// (>= diagonal) are kept, the others zeroed.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace ember
