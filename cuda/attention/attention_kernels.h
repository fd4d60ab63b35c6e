// Launchers of the fused attention kernels (cuda/attention/attention.cu), on raw pointers and an
// AttentionLayout so that g++ can call what nvcc compiled. T: float, double, __nv_bfloat16 and
// __half; a 16-bit attention keeps its softmax and accumulators in float32 (on tensor cores,
// cuda/attention/attention_tensor_cores.cu, or in the float32-tile kernel), so its per-row values and
// grad_q's accumulator are float32 (compute_t<T>).
#pragma once

#include <cstdint>

#include "core/random.h"
#include "cuda/attention/attention_layout.h"
#include "cuda/common/half_elements.h"

namespace ember::cuda {

// What the kernels take besides the operands (core's AttentionArgs, fmt-free).
template <class T>
struct AttentionPointers {
  using Compute = compute_t<T>;
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  T* out = nullptr;
  const bool* allowed = nullptr;  // a bool mask (true = may attend), or
  const T* added = nullptr;       // an additive mask, or neither
  bool is_causal = false;
  Compute scale = 1;
  float dropout_p = 0;  // compared with uniform_float as the dropout op does
  // 1 / (1 - p), computed on the host from the double p as the CPU kernel does: from the
  // float-rounded p it would be off by up to 4e-9 relative, visible in float64.
  Compute dropout_keep_scale = 1;
  PhiloxState dropout_state;
  Compute* log_sum_exp = nullptr;  // [matrices, L], contiguous: the forward writes it, the backward reads it
  // Backward only (each gradient may be null when not needed):
  const T* grad_out = nullptr;
  // Accumulated into (atomically): the caller zeroes it first. For 16-bit T a float32 buffer
  // laid out as grad_q is, which the caller rounds into grad_q afterwards.
  Compute* grad_q = nullptr;
  T* grad_k = nullptr;
  T* grad_v = nullptr;
  Compute* out_dot_grad = nullptr;  // [matrices, L] scratch: rowsum(grad_out * out)
};

// out = dropout(softmax(scale q k^T + mask)) v, and the log-sum-exp of each row of scores.
template <class T>
void launch_attention_forward(const AttentionLayout& layout, const AttentionPointers<T>& args);

// grad_q, grad_k and grad_v from grad_out, the inputs, out and the log-sum-exp.
template <class T>
void launch_attention_backward(const AttentionLayout& layout, const AttentionPointers<T>& args);

}  // namespace ember::cuda
