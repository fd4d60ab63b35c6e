// Where the fused CUDA attention kernels (cuda/attention/attention.cu) find each matrix of each operand.
//
// Every operand of attention is a batch of matrices over the same batch dims [*batch]: q [L, E],
// k [S, E], v [S, Ev], out [L, Ev], the mask [L, S] (broadcast: stride 0 where it repeats), and in
// backward grad_out, grad_q, grad_k and grad_v. Heads split off a projection as a view give
// batch strides that do not collapse to one (q [B, H, L, E] over [B, L, H * E]), so the layout
// keeps each batch dim's stride per operand, and element (row, col) of matrix n of an operand is
// at matrix_offset(operand, n) + row * row_stride + col * col_stride. The kernels read any such
// layout directly: no operand is copied to make it contiguous.
//
// Plain C++, fmt-free, callable from device code: the kernels and the CPU test
// (tests/test_attention_layout.cpp) run the very same offset arithmetic. Built from Tensors by
// cuda/attention_tensor_layout.h.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define EMBER_ATTENTION_HOST_DEVICE __host__ __device__
#else
#define EMBER_ATTENTION_HOST_DEVICE
#endif

namespace ember::cuda {

// Batch dims of size 1 are dropped; more than this many others is refused on the host.
inline constexpr int kMaxAttentionBatchDims = 8;

enum AttentionOperand : int {
  kAttentionQ,
  kAttentionK,
  kAttentionV,
  kAttentionOut,
  kAttentionMask,
  kAttentionGradOut,
  kAttentionGradQ,
  kAttentionGradK,
  kAttentionGradV,
  kAttentionOperands
};

struct AttentionLayout {
  int64_t target_length = 0;  // L
  int64_t source_length = 0;  // S
  int64_t embed = 0;          // E, of q and k
  int64_t value_embed = 0;    // Ev, of v and out
  int64_t matrices = 0;       // the product of the batch dims
  int batch_dims = 0;
  int64_t batch_sizes[kMaxAttentionBatchDims] = {};
  int64_t batch_strides[kAttentionOperands][kMaxAttentionBatchDims] = {};
  int64_t row_stride[kAttentionOperands] = {};
  int64_t col_stride[kAttentionOperands] = {};

  // Element offset of matrix n (row-major over the batch dims) of `operand`.
  EMBER_ATTENTION_HOST_DEVICE int64_t matrix_offset(int operand, int64_t n) const {
    int64_t offset = 0;
    for (int d = batch_dims - 1; d >= 0; --d) {
      offset += (n % batch_sizes[d]) * batch_strides[operand][d];
      n /= batch_sizes[d];
    }
    return offset;
  }

  // Element offset of (row, col) of matrix n of `operand`.
  EMBER_ATTENTION_HOST_DEVICE int64_t offset(int operand, int64_t n, int64_t row, int64_t col) const {
    return matrix_offset(operand, n) + row * row_stride[operand] + col * col_stride[operand];
  }
};

}  // namespace ember::cuda
