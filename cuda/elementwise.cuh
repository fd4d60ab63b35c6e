// The one elementwise kernel every copy, fill, unary, binary and select kernel of cuda/ runs:
// out[i] = f(in[i]...) over a StridedLayout, in a grid-stride loop with int64 indices, so any
// shape, broadcast and strides, and tensors beyond 2^31 elements, take the same path.
//
// CUDA only (included by .cu files); fmt-free.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "cuda/check.h"
#include "cuda/half_elements.h"
#include "cuda/launch.h"
#include "cuda/strided_layout.h"
#include "cuda/stream.h"

namespace ember::cuda {

// out[offset[0]] = f(in[offset[1]], in[offset[2]], ...). A function rather than a C++20
// template lambda, so that the .cu files compile as C++17 too.
template <class Out, class F, size_t... K, class... In>
__device__ inline void apply_at(const int64_t* offset, const F& f, Out* out, std::index_sequence<K...>,
                                const In*... in) {
  out[offset[0]] = f(in[offset[K + 1]]...);
}

template <class Out, class F, class... In>
__global__ void elementwise_kernel(StridedLayout<sizeof...(In) + 1> layout, int64_t n, F f, Out* out,
                                   const In*... in) {
  constexpr int N = sizeof...(In) + 1;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t offset[N];
    element_offsets(layout, i, offset);
    apply_at(offset, f, out, std::index_sequence_for<In...>{}, in...);
  }
}

// f applied to its operands widened to their compute types, its result rounded once to Out: how
// a kernel over 16-bit elements runs the float functor (cuda/half_elements.h). For every other
// element type both conversions are the identity, so the float32 and float64 kernels are
// unchanged.
template <class Out, class F>
struct InComputeType {
  F f;
  template <class... In>
  __device__ Out operator()(In... in) const {
    return round_to<Out>(f(to_compute(in)...));
  }
};

template <class Out, class F>
InComputeType<Out, F> in_compute_type(F f) {
  return {f};
}

// Launches elementwise_kernel over the layout's n elements and checks the launch.
template <class Out, class F, class... In>
void launch_elementwise(std::string_view op, const StridedLayout<sizeof...(In) + 1>& layout, int64_t n, F f,
                        Out* out, const In*... in) {
  if (n == 0) return;
  elementwise_kernel<Out, F, In...><<<blocks_for(n), kThreadsPerBlock, 0, current_stream()>>>(layout, n, f, out, in...);
  check_launch(op);
}

}  // namespace ember::cuda
