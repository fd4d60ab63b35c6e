// Building an AttentionLayout (cuda/attention/attention_layout.h) from Tensors, on the host.
#pragma once

#include <array>

#include "core/error.h"
#include "core/tensor.h"
#include "cuda/attention/attention_layout.h"

namespace ember::cuda {

// One tensor per AttentionOperand, nullptr (or undefined) for those a call does not have. q
// defines the batch dims and L and E, k gives S and v gives Ev; every other operand has q's
// batch dims (the mask expanded to [*batch, L, S]).
inline AttentionLayout attention_layout(const std::array<const Tensor*, kAttentionOperands>& operands) {
  const Tensor& q = *operands[kAttentionQ];
  const int64_t batch_rank = q.dim() - 2;
  AttentionLayout layout;
  layout.target_length = q.size(-2);
  layout.embed = q.size(-1);
  layout.source_length = operands[kAttentionK]->size(-2);
  layout.value_embed = operands[kAttentionV]->size(-1);
  layout.matrices = 1;
  for (int64_t d = 0; d < batch_rank; ++d) {
    layout.matrices *= q.size(d);
    if (q.size(d) == 1) continue;  // index 0 only: its strides never matter
    EMBER_CHECK(layout.batch_dims < kMaxAttentionBatchDims,
                "scaled_dot_product_attention: the CUDA kernels take at most {} batch dims of size > 1, got q of "
                "shape {}",
                kMaxAttentionBatchDims, shape_str(q.sizes()));
    layout.batch_sizes[layout.batch_dims] = q.size(d);
    for (int o = 0; o < kAttentionOperands; ++o) {
      const Tensor* operand = operands[o];
      if (operand != nullptr && operand->defined()) layout.batch_strides[o][layout.batch_dims] = operand->strides()[d];
    }
    ++layout.batch_dims;
  }
  for (int o = 0; o < kAttentionOperands; ++o) {
    const Tensor* operand = operands[o];
    if (operand == nullptr || !operand->defined()) continue;
    EMBER_CHECK(operand->dim() == q.dim(),
                "scaled_dot_product_attention: every operand of the CUDA kernels has q's {} dims, got shape {}",
                q.dim(), shape_str(operand->sizes()));
    layout.row_stride[o] = operand->strides()[q.dim() - 2];
    layout.col_stride[o] = operand->strides()[q.dim() - 1];
  }
  return layout;
}

}  // namespace ember::cuda
