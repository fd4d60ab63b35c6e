// What the two fused attention kernels share (cuda/attention/attention.cu, the float32-tile kernel for
// every dtype, and cuda/attention/attention_tensor_cores.cu, the 16-bit tensor-core path): a score's mask,
// the dropout of a weight drawn from the dropout op's Philox counters, and the launch helpers.
// Both kernels call these, so the two paths mask and drop exactly the same elements.
// fmt-free: nvcc reads it.
#pragma once

#include <cstdint>
#include <limits>

#include "cuda/attention/attention_kernels.h"
#include "cuda/runtime/check.h"
#include "cuda/common/half_elements.h"
#include "cuda/runtime/once_per_device.h"

namespace ember::cuda {

template <class T>
__device__ inline T minus_infinity() {
  return -std::numeric_limits<T>::infinity();
}

// Whether score (i, j) of matrix n is hidden by the causal or bool mask (for i < L, j < S).
template <class T>
__device__ inline bool is_masked_out(const AttentionLayout& layout, const AttentionPointers<T>& args, int64_t n,
                                     int64_t i, int64_t j) {
  if (args.is_causal) return j > i;
  if (args.allowed != nullptr) return !args.allowed[layout.offset(kAttentionMask, n, i, j)];
  return false;
}

// The score of (i, j): scale q_i . k_j (the product given), masked; -inf past the lengths.
template <class T, class C = compute_t<T>>
__device__ inline C masked_score(const AttentionLayout& layout, const AttentionPointers<T>& args, int64_t n,
                                 int64_t i, int64_t j, C product) {
  if (i >= layout.target_length || j >= layout.source_length) return minus_infinity<C>();
  if (is_masked_out(layout, args, n, i, j)) return minus_infinity<C>();
  C score = product * args.scale;
  if (args.added != nullptr) score += to_compute(args.added[layout.offset(kAttentionMask, n, i, j)]);
  return score;
}

// The dropout of the weights, drawn again wherever a kernel needs a weight's factor.
template <class T, class C = compute_t<T>>
struct WeightsDropout {
  bool on;
  float p;
  C keep_scale;        // 1 / (1 - p), from the host (AttentionPointers::dropout_keep_scale)
  PhiloxState draw;    // absolute: resolved once, from the device pair inside a CUDA graph

  __device__ explicit WeightsDropout(const AttentionPointers<T>& args)
      : on(args.dropout_p > 0),
        p(args.dropout_p),
        keep_scale(on ? args.dropout_keep_scale : C(1)),
        draw(on ? resolve(args.dropout_state) : PhiloxState{}) {}

  // 1 / (1 - p) if weight (i, j) of matrix n is kept, else 0; 1 without dropout.
  __device__ C factor(const AttentionLayout& layout, int64_t n, int64_t i, int64_t j) const {
    if (!on) return C(1);
    const uint64_t element = static_cast<uint64_t>((n * layout.target_length + i) * layout.source_length + j);
    return uniform_float(random_word(draw, element)) >= p ? keep_scale : C(0);
  }
};

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
template <class T>
void launch_attention_forward_tensor_cores(const AttentionLayout& layout, const AttentionPointers<T>& args);
template <class T>
void launch_attention_backward_tensor_cores(const AttentionLayout& layout, const AttentionPointers<T>& args);

}  // namespace ember::cuda
