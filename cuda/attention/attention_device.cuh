// What the fused attention kernels' launchers share: the grid's shape and the opt-in to more
// shared memory; and, through cuda/attention/attention_scores.cuh, the masks and dropout every kernel
// applies. fmt-free: nvcc reads it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/attention_scores.cuh"
#include "cuda/runtime/check.h"
#include "cuda/runtime/once_per_device.h"

namespace ember::cuda {

// Blocks along y: one per matrix, up to CUDA's limit on gridDim.y (the kernels loop past it).
inline unsigned int attention_matrix_blocks(int64_t matrices) {
  constexpr int64_t kMaxGridY = 65535;
  return static_cast<unsigned int>(matrices < kMaxGridY ? matrices : kMaxGridY);
}

// 64-wide tiles covering `length` (rows or head dims): both kernels' tiles are 64 rows.
inline unsigned int attention_tiles(int64_t length) { return static_cast<unsigned int>((length + 63) / 64); }

// Blocks along z, one per 64-column chunk of the head dims, up to CUDA's limit on gridDim.z (the
// kernels loop past it, as they do over matrices along y).
// `limit` is CUDA's 65,535 except in the tests, which lower it to run the loop at small sizes.
inline unsigned int attention_column_blocks(int64_t length, int64_t limit) {
  const int64_t tiles = (length + 63) / 64;
  return static_cast<unsigned int>(tiles < limit ? tiles : limit);
}

// Kernels using more than 48 KiB of dynamic shared memory must say so, once on each device: the
// attribute belongs to the current device's context, so a process that set it on cuda:0 must
// set it again before the first launch on cuda:1.
inline OncePerDevice& shared_memory_opt_ins() {
  static OncePerDevice done;
  return done;
}

template <class Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes, const char* op) {
  int device = 0;
  check(cudaGetDevice(&device), op);
  const void* key = reinterpret_cast<const void*>(kernel);
  if (shared_memory_opt_ins().is_done(key, device)) return;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), op);
  shared_memory_opt_ins().mark_done(key, device);
}

// The tensor-core path (cuda/attention/attention_tensor_cores.cu), for T = __nv_bfloat16 and __half, when
// attention_uses_tensor_cores (cuda/attention/attention_tensor_core_plan.h) allows it. The backward's
// out_dot_grad must be computed already (the launcher in cuda/attention/attention.cu does it).
// The mma.sync forward (cuda/attention/flash_attention_launch.cuh), for T = __nv_bfloat16 and __half,
// and float on TF32, when attention_uses_flash_forward (cuda/attention/flash_attention_plan.h)
// allows it.
template <class T>
void launch_attention_forward_flash(const AttentionLayout& layout, const AttentionPointers<T>& args);
// Its backward, when attention_uses_flash_backward allows it; out_dot_grad computed already.
template <class T>
void launch_attention_backward_flash(const AttentionLayout& layout, const AttentionPointers<T>& args);

template <class T>
void launch_attention_forward_tensor_cores(const AttentionLayout& layout, const AttentionPointers<T>& args);
template <class T>
void launch_attention_backward_tensor_cores(const AttentionLayout& layout, const AttentionPointers<T>& args);

}  // namespace ember::cuda
