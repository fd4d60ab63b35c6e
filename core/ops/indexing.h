// Selecting by index or mask, and the triangular masks attention uses.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// out[.., j, ..] = x[.., index[j], ..] along dim; out, x and the int64 index are contiguous.
// Throws naming the first index outside [0, size of dim).
extern KernelTable<void(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index)> index_select;
// target[.., index[j], ..] += source[.., j, ..] (index_select's backward): repeated indices
// accumulate. target and source are contiguous; index is contiguous, in range, int64.
extern KernelTable<void(const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index)> index_add;
// out[i][j] = x[index[i][j]][j] for dim 0 (and so on); out and index are contiguous and of the
// same shape, x may be strided. Throws naming the first index outside [0, size of dim).
extern KernelTable<void(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index)> gather;
// target[index[i][j]][j] += source[i][j] for dim 0 (gather's backward, topk's and sort's too):
// repeated indices accumulate. target, source and index are contiguous.
extern KernelTable<void(const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index)> scatter_add;
// out = condition ? a : b, all three broadcast to out's shape (a and b of out's dtype).
extern KernelTable<void(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b)> where;
// out = x where the element (i, j) of the last two dims is kept, 0 elsewhere: kept when
// j - i <= diagonal (lower) or j - i >= diagonal (upper). out and x are contiguous.
extern KernelTable<void(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower)> triangle;
}  // namespace kernels

// Rows (along dim) picked by a 1-D int64 index; the backward scatter-adds. Indices must lie
// in [0, size): negative ones are errors, as out-of-range ones.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j] = x[index[i][j]][j] for dim 0 (and so on), index int64 of the same rank as x.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// The gradient of gather (and of sort and topk, which gather their values): grad added into
// zeros of x's shape at `index` along dim. An op of its own, whose backward is gather again.
Tensor gather_backward(const Tensor& grad, const Shape& x_shape, int64_t dim, const Tensor& index);
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
