// The gradients' unscale and inf/NaN check on CUDA: one launch per list of gradients, each
// gradient owning a run of blocks (cuda/common/tensor_list_blocks.h) that loops over its elements. A
// thread that stores a non-finite value writes 1 to the flag; every writer writes the same
// value, so the race between them is harmless, and no thread ever writes 0.
#include <cmath>

#include "cuda/runtime/check.h"
#include "cuda/ops/grad_unscale_kernels.h"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/launch.h"
#include "cuda/runtime/stream.h"
#include "cuda/common/tensor_list_blocks.h"

namespace ember::cuda {
namespace {

using ListBlocks = TensorListBlocks<kGradsPerLaunch>;

template <class T>
__global__ void unscale_grads_kernel(UnscaleTensorList<T> list, ListBlocks blocks, double inverse_scale,
                                     float* found_inf) {
  using C = compute_t<T>;
  const int t = blocks.tensor_of(blockIdx.x);
  const int64_t local_block = blockIdx.x - blocks.first[t], stride = blocks.blocks_of(t) * blockDim.x;
  T* grad = list.grads[t];
  const C inverse = static_cast<C>(inverse_scale);
  bool found = false;
  for (int64_t i = local_block * blockDim.x + threadIdx.x; i < list.sizes[t]; i += stride) {
    const T stored = round_to<T>(to_compute(grad[i]) * inverse);
    grad[i] = stored;
    found = found || !isfinite(to_compute(stored));
  }
  if (found) *found_inf = 1.0f;
}

}  // namespace

template <class T>
void launch_unscale_grads(const UnscaleTensorList<T>& list, double inverse_scale, float* found_inf) {
  const ListBlocks blocks = plan_tensor_list_blocks<kGradsPerLaunch>(list.sizes, list.count, kThreadsPerBlock);
  if (blocks.total() == 0) return;
  unscale_grads_kernel<<<static_cast<unsigned int>(blocks.total()), kThreadsPerBlock, 0, current_stream()>>>(
      list, blocks, inverse_scale, found_inf);
  check_launch("unscale_grads");
}

#define EMBER_INSTANTIATE(T) \
  template void launch_unscale_grads<T>(const UnscaleTensorList<T>&, double, float*);
EMBER_FOR_EACH_FLOATING_ELEMENT(EMBER_INSTANTIATE)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
