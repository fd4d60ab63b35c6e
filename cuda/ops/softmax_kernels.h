// Launchers of the softmax and log_softmax kernels (cuda/ops/softmax.cu), on raw pointers so that
// g++ can call what nvcc compiled. Inputs are contiguous, seen as [outer, n, inner]; the op
// runs along n. Defined for float, double, __nv_bfloat16 and __half (computed in float32,
// rounded once on store).
#pragma once

#include <cstdint>

namespace ember::cuda {

template <class T>
void launch_softmax_forward(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log);

// softmax: grad_x = y * (grad_y - sum(grad_y * y)); log_softmax: grad_x = grad_y - exp(y) * sum(grad_y).
template <class T>
void launch_softmax_backward(const T* grad_y, const T* y, T* grad_x, int64_t outer, int64_t n, int64_t inner,
                             bool log);

}  // namespace ember::cuda
