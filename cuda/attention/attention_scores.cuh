// What every fused attention kernel computes the same way (the float32-tile kernel in
// cuda/attention/attention.cu, the WMMA path in cuda/attention/attention_tensor_cores.cu and the mma.sync path
// in cuda/attention/flash_attention_forward.cuh): a score's mask, and the dropout of a weight drawn
// from the dropout op's Philox counters. So every path masks and drops exactly the same elements.
//
// Device code only, with no CUDA runtime header: the CPU emulation of tests/cuda_emulation/
// compiles it too.
#pragma once

#include <cstdint>
#include <limits>

#include "cuda/attention/attention_kernels.h"
#include "cuda/common/half_elements.h"

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

}  // namespace ember::cuda
