// softmax and log_softmax along one dim: fused forward and backward kernels, stable for
// large logits and for rows that contain -inf (a fully masked row gives NaN, as in PyTorch).
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// x contiguous, seen as [outer, n, inner]; the op runs along n. `log` picks log_softmax.
extern KernelTable<void(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log)>
    softmax;
// grad_x from grad_y and the forward's output y (all contiguous, same layout).
extern KernelTable<void(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t outer, int64_t n,
                        int64_t inner, bool log)>
    softmax_backward;
}  // namespace kernels

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace ember
