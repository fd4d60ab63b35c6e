// The AdamW/Adam and SGD steps on CUDA, fused: one launch updates a whole list of parameters,
// every element read and written once. Each parameter owns a run of blocks along x, as many as
// its elements need (cuda/common/tensor_list_blocks.h), and a loop over that run covers its elements. The
// arithmetic follows the CPU step of core/ops/optimizer_steps.cpp operation by operation. The
// learning rate and Adam's step counts come from device memory; a second, one-block launch
// advances the counts once every block of the update has read them. bfloat16 and float16
// parameters (with gradients and state of their dtype) are updated in float32, each stored value
// rounded once.
#include <cmath>

#include "cuda/runtime/check.h"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/launch.h"
#include "cuda/ops/optimizer_steps_kernels.h"
#include "cuda/runtime/stream.h"
#include "cuda/common/tensor_list_blocks.h"

namespace ember::cuda {
namespace {

using ListBlocks = TensorListBlocks<kTensorsPerLaunch>;

template <class T>
__global__ void adam_step_kernel(AdamTensorList<T> list, ListBlocks blocks, AdamHyperParameters options) {
  using C = compute_t<T>;
  const int t = blocks.tensor_of(blockIdx.x);
  const int64_t local_block = blockIdx.x - blocks.first[t], stride = blocks.blocks_of(t) * blockDim.x;
  T* param = list.params[t];
  const T* grad = list.grads[t];
  T* m = list.exp_avg[t];
  T* v = list.exp_avg_sq[t];
  const double lr = *options.lr, step = *list.steps[t] + 1.0;
  const C decay = static_cast<C>(options.weight_decay);
  const C shrink = static_cast<C>(1.0 - lr * options.weight_decay);
  const C beta1 = static_cast<C>(options.beta1), beta2 = static_cast<C>(options.beta2);
  const C one_minus_beta1 = static_cast<C>(1.0 - options.beta1), one_minus_beta2 = static_cast<C>(1.0 - options.beta2);
  const C eps = static_cast<C>(options.eps);
  const C step_size = static_cast<C>(-lr / (1.0 - pow(options.beta1, step)));
  const C correction2 = static_cast<C>(sqrt(1.0 - pow(options.beta2, step)));
  for (int64_t i = local_block * blockDim.x + threadIdx.x; i < list.sizes[t]; i += stride) {
    C p = to_compute(param[i]), g = to_compute(grad[i]);
    if (options.weight_decay != 0.0) {
      if (options.decoupled_weight_decay) {
        p = p * shrink;
      } else {
        g = g + p * decay;
      }
    }
    const C m_new = to_compute(m[i]) * beta1 + g * one_minus_beta1;
    const C v_new = to_compute(v[i]) * beta2 + (g * g) * one_minus_beta2;
    m[i] = round_to<T>(m_new);
    v[i] = round_to<T>(v_new);
    param[i] = round_to<T>(p + (m_new / (sqrt(v_new) / correction2 + eps)) * step_size);
  }
}

// After the update: each parameter's step count, read by every block above, moves on by one.
template <class T>
__global__ void advance_steps_kernel(AdamTensorList<T> list) {
  const int t = threadIdx.x;
  if (t < list.count) *list.steps[t] += 1.0;
}

template <class T>
__global__ void sgd_step_kernel(SGDTensorList<T> list, ListBlocks blocks, SGDHyperParameters options) {
  using C = compute_t<T>;
  const int t = blocks.tensor_of(blockIdx.x);
  const int64_t local_block = blockIdx.x - blocks.first[t], stride = blocks.blocks_of(t) * blockDim.x;
  T* param = list.params[t];
  const T* grad = list.grads[t];
  T* buffer = list.momentum_buffers[t];
  const bool first = list.first_step[t];
  const C decay = static_cast<C>(options.weight_decay), momentum = static_cast<C>(options.momentum);
  const C keep = static_cast<C>(1.0 - options.dampening), minus_lr = static_cast<C>(-*options.lr);
  for (int64_t i = local_block * blockDim.x + threadIdx.x; i < list.sizes[t]; i += stride) {
    C direction = to_compute(grad[i]);
    if (options.weight_decay != 0.0) direction = direction + to_compute(param[i]) * decay;
    if (buffer != nullptr) {
      const C b = first ? direction : to_compute(buffer[i]) * momentum + direction * keep;
      buffer[i] = round_to<T>(b);
      direction = options.nesterov ? direction + b * momentum : b;
    }
    param[i] = round_to<T>(to_compute(param[i]) + direction * minus_lr);
  }
}

}  // namespace

template <class T>
void launch_adam_step(const AdamTensorList<T>& list, const AdamHyperParameters& options) {
  if (list.count == 0) return;
  const ListBlocks blocks = plan_tensor_list_blocks<kTensorsPerLaunch>(list.sizes, list.count, kThreadsPerBlock);
  if (blocks.total() > 0) {  // parameters of no elements still count their step, below
    adam_step_kernel<<<static_cast<unsigned int>(blocks.total()), kThreadsPerBlock, 0, current_stream()>>>(
        list, blocks, options);
    check_launch("adam_step");
  }
  static_assert(kTensorsPerLaunch <= 32, "advance_steps_kernel gives one thread of one warp to each parameter");
  advance_steps_kernel<<<1, 32, 0, current_stream()>>>(list);
  check_launch("adam_step (step counts)");
}

template <class T>
void launch_sgd_step(const SGDTensorList<T>& list, const SGDHyperParameters& options) {
  const ListBlocks blocks = plan_tensor_list_blocks<kTensorsPerLaunch>(list.sizes, list.count, kThreadsPerBlock);
  if (blocks.total() == 0) return;
  sgd_step_kernel<<<static_cast<unsigned int>(blocks.total()), kThreadsPerBlock, 0, current_stream()>>>(list, blocks,
                                                                                                      options);
  check_launch("sgd_step");
}

#define EMBER_INSTANTIATE(T)                                                                   \
  template void launch_adam_step<T>(const AdamTensorList<T>&, const AdamHyperParameters&); \
  template void launch_sgd_step<T>(const SGDTensorList<T>&, const SGDHyperParameters&);
EMBER_FOR_EACH_FLOATING_ELEMENT(EMBER_INSTANTIATE)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
