// Launchers of the fused cross_entropy kernels (cuda/ops/cross_entropy.cu) on raw pointers:
// logits [rows, classes] contiguous, targets [rows] int64 and already checked on the host,
// per-row losses, row_max and log_sum. T: float, double, __nv_bfloat16, __half; the per-row
// values (losses, row_max, log_sum, row_scale) are of T's compute type, float32 for 16-bit logits.
#pragma once

#include <cstdint>

#include "cuda/common/half_elements.h"

namespace ember::cuda {

template <class T>
void launch_cross_entropy_forward(const T* logits, const int64_t* targets, compute_t<T>* losses,
                                  compute_t<T>* row_max, compute_t<T>* log_sum, int64_t rows, int64_t classes,
                                  int64_t ignore_index, double label_smoothing);

template <class T>
void launch_cross_entropy_backward(const T* logits, const int64_t* targets, const compute_t<T>* row_max,
                                   const compute_t<T>* log_sum, const compute_t<T>* row_scale, T* grad_logits,
                                   int64_t rows, int64_t classes, int64_t ignore_index, double label_smoothing);

}  // namespace ember::cuda
