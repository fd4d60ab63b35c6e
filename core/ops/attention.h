// Scaled dot-product attention: softmax(q k^T / sqrt(d) + mask) v, with optional dropout on
// the attention weights. One op with a correct backward under masks and dropout.
//
// Where a device has the fused kernels (the CPU and CUDA do), scaled_dot_product_attention is
// one graph node: each matrix of the batch goes through its scores, mask, softmax, dropout and
// product with v in one pass while it is in cache (CUDA: in shared memory, tile by tile), and
// the backward likewise. Elsewhere, and
// where the fused kernels do not apply (q, k and v with different batch dims, a float mask
// that needs a gradient, an empty input), it is composed of matmul, masked_fill, softmax
// and dropout, whose backward is theirs. Both draw the same dropout mask.
//
// A query whose keys are all masked attends to nothing: its weights, its output row and the
// gradients through it are zero (PyTorch's scaled_dot_product_attention gives the same since its
// safe softmax), on every device and in both forms, so one empty sequence in a batch does not
// turn the loss into NaN.
#pragma once

#include <optional>

#include "core/dispatch.h"
#include "core/random.h"
#include "core/tensor.h"

namespace ember {

struct AttentionOptions {
  // Bool mask (true = may attend) or float mask (added to the scores), broadcastable to
  // [..., L, S]. Undefined for none.
  Tensor attn_mask = Tensor();
  double dropout_p = 0.0;  // applied to the weights; pass 0 in evaluation
  bool is_causal = false;  // position i attends to positions <= i (cannot combine with attn_mask)
  std::optional<double> scale = std::nullopt;  // defaults to 1/sqrt(head dim)
};

struct AttentionResult {
  Tensor output;   // [..., L, Ev]
  Tensor weights;  // [..., L, S], after dropout; defined when need_weights
};

// q [..., L, E], k [..., S, E], v [..., S, Ev]; leading dims broadcast as in matmul.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});
// The same, also returning the attention weights (for visualisation). The weights are part
// of the graph, so this is always the composed form.
AttentionResult scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v,
                                                          const AttentionOptions& options = {});

namespace kernels {
// What the fused kernels take besides the tensors.
struct AttentionArgs {
  Tensor mask;             // bool (true = may attend) or additive, expanded to [*batch, L, S]; or undefined
  bool is_causal = false;  // mask out key j > query i
  double scale = 1.0;
  double dropout_p = 0.0;
  PhiloxState dropout_state;  // the draw of the dropout op on the [*batch, L, S] weights
};
// q [*batch, L, E], k [*batch, S, E], v [*batch, S, Ev], every matrix readable by BLAS. Writes
// out [*batch, L, Ev] (any strides with a unit-stride last dim) and returns what the backward
// needs besides the inputs and out, which each device chooses: the CPU keeps the softmax
// [*batch, L, S] (before dropout), which it computes whole anyway; CUDA keeps the log-sum-exp
// of each row of scores [*batch, L], from which its backward recomputes the softmax tile by
// tile, so memory stays linear in the sequence lengths.
extern KernelTable<Tensor(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionArgs& args)>
    attention;
// The gradients of q, k and v (each undefined when not needed; laid out as out is) from
// grad_out (BLAS-readable), the forward's inputs and output, and what its kernel returned.
extern KernelTable<void(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& saved,
                        const AttentionArgs& args)>
    attention_backward;
}  // namespace kernels

}  // namespace ember
