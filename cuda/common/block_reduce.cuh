// Block-wide sum and max for the row kernels (softmax, layer_norm, cross_entropy), where one
// block owns one row: each thread folds its strided share of the row, then the block combines
// the threads' partials with warp shuffles and one shared-memory round. Every thread gets the
// result, so the row's next pass can use it at once.
#pragma once

#include <cuda_runtime.h>

#include <limits>

namespace ember::cuda {

// Threads per block of the row kernels: a multiple of the warp size, at most 32 warps.
inline constexpr int kRowThreads = 256;

template <class T>
struct SumOp {
  __device__ T operator()(T a, T b) const { return a + b; }
};

// NaN entries are ignored, as the CPU's row max ignores them (they reach the result through
// the sums computed from the row instead).
template <class T>
struct MaxOp {
  __device__ T operator()(T a, T b) const { return b > a ? b : a; }
};

// Combines `value` over the block with `op`. Must be reached by every thread of the block;
// `identity` is op's neutral element. blockDim.x must be a multiple of 32.
template <class T, class Op>
__device__ T block_reduce(T value, Op op, T identity) {
  __shared__ T partials[32];
  __shared__ T result;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  if (lane == 0) partials[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < warps ? partials[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
    if (lane == 0) result = value;
  }
  __syncthreads();
  const T combined = result;
  // A second call in the same kernel reuses partials and result: nobody may still be reading them.
  __syncthreads();
  return combined;
}

template <class T>
__device__ T block_sum(T value) {
  return block_reduce(value, SumOp<T>{}, T(0));
}

template <class T>
__device__ T block_max(T value) {
  return block_reduce(value, MaxOp<T>{}, -std::numeric_limits<T>::infinity());
}

}  // namespace ember::cuda
