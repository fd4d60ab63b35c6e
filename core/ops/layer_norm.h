// Layer normalisation over the trailing dims `normalized_shape`: a fused kernel that saves
// the mean and reciprocal standard deviation for its fused backward.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// y, mean, rstd from x (all contiguous; mean and rstd hold one value per row). weight and bias
// may be undefined.
extern KernelTable<void(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, double eps)>
    layer_norm;
// dx, dweight, dbias in one pass; any of the three may be undefined (not wanted), as may weight.
extern KernelTable<void(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                        const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                        const Tensor& weight)>
    layer_norm_backward;
}  // namespace kernels

// weight and bias (shaped normalized_shape) are optional: pass undefined Tensors to omit them.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace ember
