// Launchers of the fused cross_entropy kernels (cuda/cross_entropy.cu) on raw pointers:
// logits [rows, classes] contiguous, targets [rows] int64 and already checked on the host,
// per-row losses, row_max and log_sum. float and double.
#pragma once

#include <cstdint>

namespace ember::cuda {

template <class T>
void launch_cross_entropy_forward(const T* logits, const int64_t* targets, T* losses, T* row_max, T* log_sum,
                                  int64_t rows, int64_t classes, int64_t ignore_index, double label_smoothing);

template <class T>
void launch_cross_entropy_backward(const T* logits, const int64_t* targets, const T* row_max, const T* log_sum,
                                   const T* row_scale, T* grad_logits, int64_t rows, int64_t classes,
                                   int64_t ignore_index, double label_smoothing);

}  // namespace ember::cuda
