// Reductions over any set of dims, with keepdim. An empty dims list means all dims.
#pragma once

#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// out (shaped as x reduced over mask, keepdim or not: same elements) = sum of x over mask.
extern KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask)> sum;
}  // namespace kernels

Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
// Variance and standard deviation; unbiased divides by N - 1 (Bessel), as PyTorch's default.
Tensor var(const Tensor& x, const Shape& dims, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims, bool unbiased = true, bool keepdim = false);
Tensor var(const Tensor& x, bool unbiased = true);
Tensor std(const Tensor& x, bool unbiased = true);
// log(sum(exp(x))) computed stably (max subtracted first).
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);

// The largest (smallest) values over dims: differentiable, the gradient goes to the
// maximal elements (shared evenly between ties).
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim = false);
// Maximum of all elements.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);

// max/min along one dim: the values (differentiable, gradient to the chosen element) and
// their int64 indices (first occurrence of ties).
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
// int64 indices; the dim-less forms index the flattened tensor.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x);
Tensor argmin(const Tensor& x);

// Bool results: whether all (any) elements are nonzero.
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, const Shape& dims, bool keepdim = false);

}  // namespace ember
