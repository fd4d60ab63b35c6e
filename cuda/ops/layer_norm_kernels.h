// Launchers of the layer_norm kernels (cuda/ops/layer_norm.cu) on raw pointers. x, y and the
// gradients are contiguous [rows, n]; mean and rstd hold one value per row. A null weight or
// bias means none; a null gradient pointer means that gradient is not wanted. T: float, double,
// __nv_bfloat16, __half; mean and rstd are of T's compute type (float32 for the 16-bit formats,
// whose rows are computed on in float32 and rounded once on store).
#pragma once

#include <cstdint>

#include "cuda/common/column_sum_plan.h"
#include "cuda/common/half_elements.h"

namespace ember::cuda {

template <class T>
void launch_layer_norm_forward(const T* x, const T* weight, const T* bias, T* y, compute_t<T>* mean,
                               compute_t<T>* rstd, int64_t rows, int64_t n, double eps);

// `scratch`: layer_norm_backward_scratch_elements(rows, n) doubles of device memory when
// grad_weight or grad_bias is wanted (their partial sums, cuda/common/column_sum_plan.h).
template <class T>
void launch_layer_norm_backward(const T* grad_y, const T* x, const compute_t<T>* mean, const compute_t<T>* rstd,
                                const T* weight, T* grad_x, T* grad_weight, T* grad_bias, double* scratch,
                                int64_t rows, int64_t n);

inline int64_t layer_norm_backward_scratch_elements(int64_t rows, int64_t n) {
  return 2 * plan_column_sums(rows, n).partials_per_sum();  // grad_weight's partials, then grad_bias's
}

}  // namespace ember::cuda
