// Launchers of the fused optimizer steps (cuda/ops/optimizer_steps.cu): a "multi-tensor apply" that
// updates up to kTensorsPerLaunch parameters in one launch. The lists travel to the kernel as
// a by-value argument (under the 4 KiB kernel-argument limit), so a step needs no device
// allocation and no host-to-device copy. T: float, double, __nv_bfloat16 and __half (updated in
// float32, each stored value rounded once); every tensor contiguous. The
// learning rate and the step counts are read from device memory when the kernel runs, so a
// step recorded in a CUDA graph follows the schedule and counts its replays.
#pragma once

#include <cstdint>

namespace ember::cuda {

inline constexpr int kTensorsPerLaunch = 24;

template <class T>
struct AdamTensorList {
  static constexpr int kCapacity = kTensorsPerLaunch;
  int count = 0;
  T* params[kTensorsPerLaunch];
  const T* grads[kTensorsPerLaunch];
  T* exp_avg[kTensorsPerLaunch];
  T* exp_avg_sq[kTensorsPerLaunch];
  int64_t sizes[kTensorsPerLaunch];
  // Each parameter's step count before this update (a 0-d float64 on the device), advanced by
  // one after the update.
  double* steps[kTensorsPerLaunch];
};

struct AdamHyperParameters {
  const double* lr;  // on the device
  double beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;
};

template <class T>
void launch_adam_step(const AdamTensorList<T>& list, const AdamHyperParameters& options);

template <class T>
struct SGDTensorList {
  static constexpr int kCapacity = kTensorsPerLaunch;
  int count = 0;
  T* params[kTensorsPerLaunch];
  const T* grads[kTensorsPerLaunch];
  T* momentum_buffers[kTensorsPerLaunch];  // null when momentum is 0
  int64_t sizes[kTensorsPerLaunch];
  bool first_step[kTensorsPerLaunch];  // the buffer is new: it becomes the direction
};

struct SGDHyperParameters {
  const double* lr;  // on the device
  double momentum, dampening, weight_decay;
  bool nesterov;
};

template <class T>
void launch_sgd_step(const SGDTensorList<T>& list, const SGDHyperParameters& options);

}  // namespace ember::cuda
