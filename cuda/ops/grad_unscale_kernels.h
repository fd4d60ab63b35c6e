// Launcher of the gradients' unscale and inf/NaN check (cuda/ops/grad_unscale.cu), a multi-tensor
// kernel: up to kGradsPerLaunch gradients of one dtype per launch, the list passed by value.
// T: float, double, __nv_bfloat16 and __half; every gradient contiguous.
#pragma once

#include <cstdint>

namespace ember::cuda {

inline constexpr int kGradsPerLaunch = 32;

template <class T>
struct UnscaleTensorList {
  static constexpr int kCapacity = kGradsPerLaunch;
  int count = 0;
  T* grads[kGradsPerLaunch];
  int64_t sizes[kGradsPerLaunch];
};

// grads[i] *= inverse_scale, each stored value rounded once; *found_inf = 1 (a float on the
// device) if any stored value is inf or NaN.
template <class T>
void launch_unscale_grads(const UnscaleTensorList<T>& list, double inverse_scale, float* found_inf);

}  // namespace ember::cuda
