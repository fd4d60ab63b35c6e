// Reductions over any set of dims, with keepdim. An empty dims list means all dims.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/dispatch.h"
#include "core/ops/op_codes.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// Every kernel writes `out`, shaped as x reduced over `mask` (keepdim or not: the same
// elements in the same order), for x of any strides.
// out = sum of x over mask.
extern KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask)> sum;
// out = sum of (x - mean)^2 over mask, divided by max(N - correction, 0), computed in two passes.
extern KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask, int64_t correction)>
    variance;
// out = log(sum(exp(x))) over mask, with the max subtracted first.
extern KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask)> logsumexp;
// out = the largest (smallest) x over mask; NaN wins. Needs at least one element per output.
extern KernelTable<void(Extremum which, const Tensor& out, const Tensor& x, const std::vector<bool>& mask)>
    extremum;
// indices (int64) = position of the first largest (smallest) x over mask, counted in row-major
// order over the reduced dims (for one dim, the index along it); the first NaN wins. values,
// when defined, receives x there.
extern KernelTable<void(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& x,
                        const std::vector<bool>& mask)>
    extremum_index;
}  // namespace kernels

Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
// Variance and standard deviation; unbiased divides by N - 1 (Bessel), as PyTorch's default.
// Floating point only; a group of one element with unbiased gives NaN, as in PyTorch.
Tensor var(const Tensor& x, const Shape& dims, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims, bool unbiased = true, bool keepdim = false);
Tensor var(const Tensor& x, bool unbiased = true);
Tensor std(const Tensor& x, bool unbiased = true);
// Without these, var(x, {0}) would pick the overload above (0 converts to bool) and reduce all
// dims with unbiased = false; a braced list prefers an initializer_list parameter.
Tensor var(const Tensor& x, std::initializer_list<int64_t> dims, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, std::initializer_list<int64_t> dims, bool unbiased = true, bool keepdim = false);
// log(sum(exp(x))) computed stably (max subtracted first); a group that is all -inf gives -inf.
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);

// The largest (smallest) values over dims: differentiable, the gradient goes to the
// maximal elements (shared evenly between ties). NaN propagates. Reducing over a dim of
// size 0 throws: the max of nothing is undefined. They take int64 as well.
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
// int64 indices; the dim-less forms index the flattened tensor. A NaN counts as the extremum.
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
