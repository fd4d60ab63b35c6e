// Launch geometry shared by the kernels: how many blocks cover n elements. Kernels use
// grid-stride loops, so the grid is capped and a tensor of any size (beyond 2^31 elements too)
// is covered by int64 indices.
#pragma once

#include <cuda_runtime.h>  // dim3

#include <algorithm>
#include <cstdint>

namespace ember::cuda {

inline constexpr int kThreadsPerBlock = 256;

// Enough blocks to give every element a thread, but no more than a few waves of the GPU: past
// that, grid-stride loops do the same work with less scheduling.
inline unsigned int blocks_for(int64_t n, int threads = kThreadsPerBlock) {
  constexpr int64_t kMaxBlocks = 132 * 32;  // an H100 has 132 SMs; 32 blocks each is plenty
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

}  // namespace ember::cuda
