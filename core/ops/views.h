// Views: tensors that share storage with their input and only change shape, strides or
// offset. All are differentiable; none copies data (reshape copies only when it must).
#pragma once

#include <optional>

#include "core/tensor.h"

namespace ember {

// A view with a new shape; one size may be -1 (inferred). Throws when the strides do not
// allow it (use reshape).
Tensor view(const Tensor& x, const Shape& shape);
// view when possible, else a contiguous copy.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// Transpose of a tensor of rank <= 2.
Tensor t(const Tensor& x);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor unsqueeze(const Tensor& x, int64_t dim);
// Removes all size-1 dims, or the given one if it has size 1.
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
// Broadcasts size-1 dims (and new leading dims) to `shape` with stride 0; -1 keeps a size.
Tensor expand(const Tensor& x, const Shape& shape);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// x[start:end:step] along dim, with Python's clamping of start and end (negative ones count
// from the end); step must be positive.
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step = 1);
// x[..., index, ...]: removes dim.
Tensor select(const Tensor& x, int64_t dim, int64_t index);

}  // namespace ember
