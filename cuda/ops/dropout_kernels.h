// Launcher of the dropout kernel (cuda/ops/dropout.cu) on raw pointers: out[i] = x[i] / (1 - p)
// where element i is kept, else 0, with the mask of core/ops/dropout.cpp drawn from Philox
// `state` (resolved on the device, so a draw recorded into a CUDA graph reads its seed and
// offset from device memory). Forward and backward run it alike. float, double, __nv_bfloat16
// and __half (scaled in float32, rounded once); x and out contiguous.
#pragma once

#include <cstdint>

#include "core/random.h"

namespace ember::cuda {

template <class T>
void launch_dropout(const T* x, T* out, int64_t numel, double p, PhiloxState state);

}  // namespace ember::cuda
