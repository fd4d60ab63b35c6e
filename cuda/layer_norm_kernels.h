// Launchers of the layer_norm kernels (cuda/layer_norm.cu) on raw pointers. x, y and the
// gradients are contiguous [rows, n]; mean and rstd hold one value per row. A null weight or
// bias means none; a null gradient pointer means that gradient is not wanted. float and double.
#pragma once

#include <cstdint>

namespace ember::cuda {

template <class T>
void launch_layer_norm_forward(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, int64_t rows,
                               int64_t n, double eps);

template <class T>
void launch_layer_norm_backward(const T* grad_y, const T* x, const T* mean, const T* rstd, const T* weight,
                                T* grad_x, T* grad_weight, T* grad_bias, int64_t rows, int64_t n);

}  // namespace ember::cuda
