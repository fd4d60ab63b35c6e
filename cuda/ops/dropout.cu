// dropout on CUDA with the CPU's mask, bit for bit: one thread per Philox counter draws its four
// words with core/random.h's own philox4x32 and applies them to elements 4c .. 4c + 3, each
// kept iff uniform_float(word) >= float(p). Under manual_seed both devices drop the same elements,
// whatever the dtype: a bfloat16 or float16 element is scaled in float32 and rounded once.
#include "core/random.h"
#include "cuda/runtime/check.h"
#include "cuda/ops/dropout_kernels.h"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/launch.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

template <class T, class C = compute_t<T>>
__global__ void dropout_counters(const T* x, T* out, int64_t numel, float threshold, C scale, PhiloxState draw) {
  const PhiloxState state = resolve(draw);
  const int64_t counters = (numel + 3) / 4;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < counters; c += int64_t(gridDim.x) * blockDim.x) {
    const std::array<uint32_t, 4> words = philox4x32(state.seed, state.offset + static_cast<uint64_t>(c));
    for (int w = 0; w < 4; ++w) {
      const int64_t i = 4 * c + w;
      if (i >= numel) break;
      // x * (keep * scale), as the CPU computes it: a dropped NaN stays NaN on both devices.
      out[i] = round_to<T>(to_compute(x[i]) * (static_cast<C>(uniform_float(words[w]) >= threshold) * scale));
    }
  }
}

}  // namespace

template <class T>
void launch_dropout(const T* x, T* out, int64_t numel, double p, PhiloxState state) {
  if (numel == 0) return;
  dropout_counters<<<blocks_for((numel + 3) / 4), kThreadsPerBlock, 0, current_stream()>>>(
      x, out, numel, static_cast<float>(p), static_cast<compute_t<T>>(1.0 / (1.0 - p)), state);
  check_launch("dropout");
}

template void launch_dropout<float>(const float*, float*, int64_t, double, PhiloxState);
template void launch_dropout<double>(const double*, double*, int64_t, double, PhiloxState);
template void launch_dropout<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, int64_t, double, PhiloxState);
template void launch_dropout<__half>(const __half*, __half*, int64_t, double, PhiloxState);

}  // namespace ember::cuda
