// softmax and log_softmax along one dim: fused forward and backward kernels, stable for
// large logits and for rows that contain -inf (a fully masked row gives NaN, as in PyTorch).
#pragma once

#include "core/tensor.h"

namespace ember {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace ember
