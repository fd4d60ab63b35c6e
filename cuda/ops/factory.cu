// Factories on the GPU: fill, arange, and the random draws. The random kernels compute each
// element with the functions the CPU kernels use (core/random_elements.h), so after
// manual_seed(n) a CUDA draw holds the same numbers as a CPU draw.
#include "core/random_elements.h"
#include "cuda/common/elementwise.cuh"
#include "cuda/ops/factory_kernels.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

template <class T>
struct Constant {
  T value;
  __device__ T operator()() const { return value; }
};

// Calls body(i) for every i in [0, n), spread over the grid.
#define EMBER_GRID_STRIDE_LOOP(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);              \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <class T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step) {
  // One fused multiply-add, rounded once, as the CPU's std::fma (core/ops/factory.cpp): the
  // same IEEE operation on both devices, so the same bits whatever either compiler contracts.
  EMBER_GRID_STRIDE_LOOP(i, n) out[i] = round_to<T>(__fma_rn(static_cast<double>(i), step, start));
}

// The random kernels: element i takes the value core/random_elements.h gives it. Each first
// resolves its draw's state, which a kernel recorded into a CUDA graph reads from device memory.
// A 16-bit draw takes the float32 draw's words, so after the same seed it holds the float32
// numbers rounded, as on the CPU: uniform ones towards zero (to stay below 1), normal ones to
// nearest even; randint's integers are rounded once from the exact integer.
template <class T>
__global__ void uniform_kernel(T* out, int64_t n, PhiloxState draw) {
  const PhiloxState state = resolve(draw);
  EMBER_GRID_STRIDE_LOOP(i, n) {
    if constexpr (is_16_bit_element<T>) {
      out[i] = round_toward_zero<T>(uniform_element<float>(state, static_cast<uint64_t>(i)));
    } else {
      out[i] = uniform_element<T>(state, static_cast<uint64_t>(i));
    }
  }
}

template <class T>
__global__ void normal_kernel(T* out, int64_t n, PhiloxState draw) {
  const PhiloxState state = resolve(draw);
  EMBER_GRID_STRIDE_LOOP(i, n) out[i] = round_to<T>(normal_element<compute_t<T>>(state, static_cast<uint64_t>(i)));
}

template <class T>
__global__ void randint_kernel(T* out, int64_t n, int64_t low, uint64_t range, PhiloxState draw) {
  const PhiloxState state = resolve(draw);
  EMBER_GRID_STRIDE_LOOP(i, n) {
    if constexpr (is_16_bit_element<T>) {
      out[i] = round_to<T>(randint_element<int64_t>(state, static_cast<uint64_t>(i), low, range));
    } else {
      out[i] = randint_element<T>(state, static_cast<uint64_t>(i), low, range);
    }
  }
}

#undef EMBER_GRID_STRIDE_LOOP

}  // namespace

template <class T>
void launch_fill(const StridedLayout<1>& layout, int64_t n, T* out, double value) {
  launch_elementwise("fill", layout, n, Constant<T>{round_to<T>(value)}, out);
}

template <class T>
void launch_arange(T* out, int64_t n, double start, double step) {
  if (n == 0) return;
  arange_kernel<<<blocks_for(n), kThreadsPerBlock, 0, current_stream()>>>(out, n, start, step);
  check_launch("arange");
}

template <class T>
void launch_uniform(T* out, int64_t n, PhiloxState state) {
  if (n == 0) return;
  uniform_kernel<<<blocks_for(n), kThreadsPerBlock, 0, current_stream()>>>(out, n, state);
  check_launch("rand");
}

template <class T>
void launch_normal(T* out, int64_t n, PhiloxState state) {
  if (n == 0) return;
  normal_kernel<<<blocks_for(n), kThreadsPerBlock, 0, current_stream()>>>(out, n, state);
  check_launch("randn");
}

template <class T>
void launch_randint(T* out, int64_t n, int64_t low, uint64_t range, PhiloxState state) {
  if (n == 0) return;
  randint_kernel<<<blocks_for(n), kThreadsPerBlock, 0, current_stream()>>>(out, n, low, range, state);
  check_launch("randint");
}

#define EMBER_INSTANTIATE_FLOATING(T)                                                   \
  template void launch_fill<T>(const StridedLayout<1>&, int64_t, T*, double);          \
  template void launch_arange<T>(T*, int64_t, double, double);                         \
  template void launch_uniform<T>(T*, int64_t, PhiloxState);                           \
  template void launch_normal<T>(T*, int64_t, PhiloxState);                            \
  template void launch_randint<T>(T*, int64_t, int64_t, uint64_t, PhiloxState);
EMBER_INSTANTIATE_FLOATING(float)
EMBER_INSTANTIATE_FLOATING(double)
EMBER_INSTANTIATE_FLOATING(__nv_bfloat16)
EMBER_INSTANTIATE_FLOATING(__half)
#undef EMBER_INSTANTIATE_FLOATING
template void launch_fill<int64_t>(const StridedLayout<1>&, int64_t, int64_t*, double);
template void launch_fill<bool>(const StridedLayout<1>&, int64_t, bool*, double);
template void launch_arange<int64_t>(int64_t*, int64_t, double, double);
template void launch_randint<int64_t>(int64_t*, int64_t, int64_t, uint64_t, PhiloxState);

}  // namespace ember::cuda
