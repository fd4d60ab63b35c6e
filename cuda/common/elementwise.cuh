// The one elementwise kernel every copy, fill, unary, binary and select kernel of cuda/ runs:
// out[i] = f(in[i]...) over a StridedLayout, in a grid-stride loop with int64 indices, so any
// shape, broadcast and strides, and tensors beyond 2^31 elements, take the same path.
//
// CUDA only (included by .cu files); fmt-free.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "cuda/runtime/check.h"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/launch.h"
#include "cuda/common/strided_layout.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {

// f(in[offset[1]], in[offset[2]], ...). A function rather than a C++20 template lambda, so that
// the .cu files compile as C++17 too.
template <class Out, class F, size_t... K, class... In>
__device__ inline Out apply_at(const int64_t* offset, const F& f, std::index_sequence<K...>, const In*... in) {
  return f(in[offset[K + 1]]...);
}

// Elements per thread per turn of the loop. A thread that loads one element and stores it before
// loading the next keeps one load in flight, which even a full GPU's worth of threads makes too
// few to stream memory at its rate; four independent loads issued before the first store keep
// four in flight. A warp still reads 32 adjacent elements at a time (i, i + step, ...).
inline constexpr int kElementsPerThread = 4;

template <class Out, class F, class... In>
__global__ void elementwise_kernel(StridedLayout<sizeof...(In) + 1> layout, int64_t n, F f, Out* out,
                                   const In*... in) {
  constexpr int N = sizeof...(In) + 1;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; first < n;
       first += kElementsPerThread * step) {
    Out results[kElementsPerThread];
    int64_t out_offsets[kElementsPerThread];
    #pragma unroll
    for (int u = 0; u < kElementsPerThread; ++u) {
      const int64_t i = first + u * step;
      if (i < n) {
        int64_t offset[N];
        element_offsets(layout, i, offset);
        out_offsets[u] = offset[0];
        results[u] = apply_at<Out>(offset, f, std::index_sequence_for<In...>{}, in...);
      }
    }
    // Every result before the first store. An input the kernel gets either shares no memory
    // with out or holds the same elements at the same addresses (x.add_(x)): an input that
    // partly overlaps out is copied or refused first (core/memory_overlap.h).
    #pragma unroll
    for (int u = 0; u < kElementsPerThread; ++u) {
      if (first + u * step < n) out[out_offsets[u]] = results[u];
    }
  }
}

// f applied to its operands widened to their compute types, its result rounded once to Out: how
// a kernel over 16-bit elements runs the float functor (cuda/common/half_elements.h). For every other
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
