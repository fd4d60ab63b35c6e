// The tensor-core path of fused attention (cuda/attention/attention_tensor_cores.cu): when it is taken, and
// where each of its tiles sits in a block's shared memory.
//
// Plain C++17, fmt-free and free of CUDA headers: the kernels read the same plan (on the device),
// the launcher applies the same rule, and a CPU test (tests/test_attention_tensor_core_plan.cpp)
// checks both without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cuda/attention/attention_layout.h"

namespace ember::cuda {

// A block takes 64 rows (forward: queries; backward: keys) with 4 warps, each warp 16 of them.
inline constexpr int kTensorCoreTile = 64;
inline constexpr int kTensorCoreWarps = 4;
inline constexpr int kTensorCoreThreads = 32 * kTensorCoreWarps;
inline constexpr int kTensorCoreMaxHeadDim = 128;
// WMMA loads and stores want fragment pointers 32-byte aligned; every buffer starts on 128 bytes.
inline constexpr size_t kTensorCoreAlignment = 128;

// The head dim the kernels are compiled for (E and Ev are zero-padded up to it): 64 or 128; 0
// when E or Ev is out of the tensor-core kernels' reach.
EMBER_ATTENTION_HOST_DEVICE constexpr int tensor_core_head_dim(int64_t embed, int64_t value_embed) {
  const int64_t widest = embed > value_embed ? embed : value_embed;
  if (embed < 1 || value_embed < 1 || widest > kTensorCoreMaxHeadDim) return 0;
  return widest <= 64 ? 64 : 128;
}

// Row pitches, in elements. 16-bit tiles (q, k, v, grad_out, weights, dS) get 8 elements (16
// bytes) of padding per row, floats (scores, dP, out) 4 (16 bytes): rows of a 16 x 16 fragment
// then start on different banks, and every 16th row stays 32-byte aligned, as does every 16th
// column (ldm: a multiple of 8 for 16-bit elements, of 4 for float, as WMMA requires).
EMBER_ATTENTION_HOST_DEVICE constexpr int tensor_core_operand_pitch(int head_dim) { return head_dim + 8; }
inline constexpr int kTensorCoreWeightsPitch = kTensorCoreTile + 8;  // 16-bit, 64 columns
inline constexpr int kTensorCoreScoresPitch = kTensorCoreTile + 4;   // float, 64 columns
EMBER_ATTENTION_HOST_DEVICE constexpr int tensor_core_out_pitch(int head_dim) { return head_dim + 4; }

EMBER_ATTENTION_HOST_DEVICE constexpr size_t tensor_core_align(size_t bytes) {
  return (bytes + kTensorCoreAlignment - 1) / kTensorCoreAlignment * kTensorCoreAlignment;
}

// Byte offsets of the forward kernel's buffers: q, k and v tiles (16-bit, 64 x head_dim), the
// scores (float, 64 x 64), the weights P rounded to 16 bits for P v (64 x 64), and the output
// accumulator (float, 64 x head_dim). Each warp uses rows [16 w, 16 w + 16) of the last three.
struct TensorCoreForwardPlan {
  size_t q = 0, k = 0, v = 0, scores = 0, weights = 0, out = 0, bytes = 0;
};

EMBER_ATTENTION_HOST_DEVICE constexpr TensorCoreForwardPlan tensor_core_forward_plan(int head_dim) {
  const size_t operand = tensor_core_align(size_t(kTensorCoreTile) * tensor_core_operand_pitch(head_dim) * 2);
  TensorCoreForwardPlan plan;
  plan.q = 0;
  plan.k = plan.q + operand;
  plan.v = plan.k + operand;
  plan.scores = plan.v + operand;
  plan.weights = plan.scores + tensor_core_align(size_t(kTensorCoreTile) * kTensorCoreScoresPitch * 4);
  plan.out = plan.weights + tensor_core_align(size_t(kTensorCoreTile) * kTensorCoreWeightsPitch * 2);
  plan.bytes = plan.out + tensor_core_align(size_t(kTensorCoreTile) * tensor_core_out_pitch(head_dim) * 4);
  return plan;
}

// Byte offsets of the backward kernel's buffers: q, k, v and grad_out tiles (16-bit, 64 x
// head_dim); the scores and dP transposed (float, 64 keys x 64 queries); the weights W = P f and
// dS, transposed and rounded to 16 bits (64 x 64); a 16 x 16 float scratch per warp through which
// accumulators reach global memory; and each query's log-sum-exp and D (64 floats each).
struct TensorCoreBackwardPlan {
  size_t q = 0, k = 0, v = 0, grad_out = 0, scores = 0, grad_weights = 0, weights = 0, grad_scores = 0,
         scratch = 0, log_sum_exp = 0, row_term = 0, bytes = 0;
};

EMBER_ATTENTION_HOST_DEVICE constexpr TensorCoreBackwardPlan tensor_core_backward_plan(int head_dim) {
  const size_t operand = tensor_core_align(size_t(kTensorCoreTile) * tensor_core_operand_pitch(head_dim) * 2);
  const size_t square_float = tensor_core_align(size_t(kTensorCoreTile) * kTensorCoreScoresPitch * 4);
  const size_t square_half = tensor_core_align(size_t(kTensorCoreTile) * kTensorCoreWeightsPitch * 2);
  const size_t rows = tensor_core_align(size_t(kTensorCoreTile) * 4);
  TensorCoreBackwardPlan plan;
  plan.q = 0;
  plan.k = plan.q + operand;
  plan.v = plan.k + operand;
  plan.grad_out = plan.v + operand;
  plan.scores = plan.grad_out + operand;
  plan.grad_weights = plan.scores + square_float;
  plan.weights = plan.grad_weights + square_float;
  plan.grad_scores = plan.weights + square_half;
  plan.scratch = plan.grad_scores + square_half;
  plan.log_sum_exp = plan.scratch + tensor_core_align(size_t(kTensorCoreWarps) * 16 * 16 * 4);
  plan.row_term = plan.log_sum_exp + rows;
  plan.bytes = plan.row_term + rows;
  return plan;
}

// What the choice depends on besides the operands: the device's compute capability (major * 10 +
// minor) and the shared memory a block may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin).
struct TensorCoreDevice {
  int compute_capability = 0;
  int64_t shared_memory_per_block = 0;
};

// The rule: 16-bit operands, 1 <= E, Ev <= 128 (any such E and Ev: the tiles are zero-padded to
// the compiled head dim, so E need not be a multiple of 16), a device of compute capability 8.0
// or more (bf16 and fp16 WMMA), whose blocks can have both kernels' shared memory, and the path
// not switched off (EMBER_ATTENTION_TENSOR_CORES=0). Otherwise the float32-tile kernel runs.
// Forward and backward follow the same rule, so a backward runs the path its forward ran.
inline bool attention_uses_tensor_cores(bool sixteen_bit, int64_t embed, int64_t value_embed,
                                        const TensorCoreDevice& device, bool allowed) {
  if (!allowed || !sixteen_bit || device.compute_capability < 80) return false;
  const int head_dim = tensor_core_head_dim(embed, value_embed);
  if (head_dim == 0) return false;
  const size_t forward = tensor_core_forward_plan(head_dim).bytes, backward = tensor_core_backward_plan(head_dim).bytes;
  const size_t needed = forward > backward ? forward : backward;
  return static_cast<int64_t>(needed) <= device.shared_memory_per_block;
}

// EMBER_ATTENTION_TENSOR_CORES: unset or anything but "0" allows the tensor-core path; "0" forces
// the float32-tile kernel (to compare the two on a GPU).
inline bool tensor_cores_allowed_by(const char* environment_value) {
  return environment_value == nullptr || std::strcmp(environment_value, "0") != 0;
}

// Whether the tensor-core path may be taken: EMBER_ATTENTION_TENSOR_CORES, read once at the first
// call, unless set since. Defined with the kernels (cuda/attention/attention.cu); the setter is for tests
// and benchmarks that compare both paths in one process.
bool attention_tensor_cores_allowed();
void set_attention_tensor_cores_allowed(bool allowed);

// The most blocks the float32-tile kernels launch along z (64-column chunks of the head dims):
// CUDA's limit, 65,535, unless a test lowers it to exercise the kernels' loop over chunks (it is
// declared here, in a header the tests can include, beside the other attention setting).
void set_attention_column_block_limit(int64_t limit);

// Allows or forbids the tensor-core path for the scope's lifetime, then restores the setting.
class AttentionTensorCoresScope {
 public:
  explicit AttentionTensorCoresScope(bool allowed) : before_(attention_tensor_cores_allowed()) {
    set_attention_tensor_cores_allowed(allowed);
  }
  ~AttentionTensorCoresScope() { set_attention_tensor_cores_allowed(before_); }
  AttentionTensorCoresScope(const AttentionTensorCoresScope&) = delete;
  AttentionTensorCoresScope& operator=(const AttentionTensorCoresScope&) = delete;

 private:
  bool before_;
};

}  // namespace ember::cuda
