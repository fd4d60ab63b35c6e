// Layer normalisation over the trailing dims `normalized_shape`: a fused kernel that saves
// the mean and reciprocal standard deviation for its fused backward.
#pragma once

#include "core/tensor.h"

namespace ember {

// weight and bias (shaped normalized_shape) are optional: pass undefined Tensors to omit them.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace ember
