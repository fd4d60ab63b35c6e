// Scaled dot-product attention, weights = dropout(softmax(q k^T * scale + mask)) and
// output = weights v, in two forms: one node that runs the fused kernels, and a composition
// of ember ops (matmul, masked_fill, softmax, dropout) whose backward is theirs, for what the
// fused kernels do not cover. The CPU's fused kernels are in attention_cpu.cpp.
#include "core/ops/attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/autocast.h"
#include "core/autograd/record.h"
#include "core/cpu/blas.h"
#include "core/ops/copy.h"

#include "core/ops/dropout.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/indexing.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"
#include "core/ops/views.h"

namespace ember {
namespace kernels {
constinit KernelTable<Tensor(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionArgs& args)>
    attention{"attention"};
constinit KernelTable<void(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                           const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& saved,
                           const AttentionArgs& args)>
    attention_backward{"attention_backward"};
}  // namespace kernels

namespace {

// The scores' shape [*batch, L, S], the batch dims of q and k broadcast together.
Shape scores_shape_of(const Tensor& q, const Tensor& k) {
  Shape shape = broadcast_shapes(Shape(q.sizes().begin(), q.sizes().end() - 2),
                                 Shape(k.sizes().begin(), k.sizes().end() - 2), "scaled_dot_product_attention");
  shape.push_back(q.size(-2));
  shape.push_back(k.size(-2));
  return shape;
}

void check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  EMBER_CHECK(q.defined() && k.defined() && v.defined(), "scaled_dot_product_attention: q, k or v is undefined");
  EMBER_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
              "scaled_dot_product_attention: q, k and v need at least 2 dims [..., L, E], got shapes {}, {} and {}",
              shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes()));
  EMBER_CHECK(is_floating_point(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(),
              "scaled_dot_product_attention: q, k and v must share one floating dtype, got {}, {} and {}", q.dtype(),
              k.dtype(), v.dtype());
  EMBER_CHECK(q.device() == k.device() && q.device() == v.device(),
              "scaled_dot_product_attention: q, k and v must be on one device, got {}, {} and {}", q.device(),
              k.device(), v.device());
  EMBER_CHECK(q.size(-1) == k.size(-1),
              "scaled_dot_product_attention: q of shape {} and k of shape {} differ in the embedding dim ({} != {})",
              shape_str(q.sizes()), shape_str(k.sizes()), q.size(-1), k.size(-1));
  EMBER_CHECK(k.size(-2) == v.size(-2),
              "scaled_dot_product_attention: k of shape {} and v of shape {} differ in the source length ({} != {})",
              shape_str(k.sizes()), shape_str(v.sizes()), k.size(-2), v.size(-2));
  EMBER_CHECK(options.dropout_p >= 0.0 && options.dropout_p < 1.0,
              "scaled_dot_product_attention: dropout_p must be in [0, 1), got {}", options.dropout_p);
  const Tensor& mask = options.attn_mask;
  if (!mask.defined()) return;
  EMBER_CHECK(!options.is_causal, "scaled_dot_product_attention: pass either attn_mask or is_causal, not both");
  EMBER_CHECK(mask.device() == q.device(), "scaled_dot_product_attention: attn_mask is on {} but q is on {}",
              mask.device(), q.device());
  EMBER_CHECK(mask.dtype() == kBool || mask.dtype() == q.dtype(),
              "scaled_dot_product_attention: attn_mask must be bool or {} like q, got {}", q.dtype(), mask.dtype());
  const Shape scores_shape = scores_shape_of(q, k);
  EMBER_CHECK(is_broadcastable_to(mask.sizes(), scores_shape),
              "scaled_dot_product_attention: attn_mask of shape {} does not broadcast to the scores' shape {}",
              shape_str(mask.sizes()), shape_str(scores_shape));
}

double scale_of(const Tensor& q, const AttentionOptions& options) {
  return options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
}

// The scores with the mask applied: -inf where a bool mask says no (or, causal, past the
// diagonal), a float mask added.
Tensor masked_scores(const Tensor& scores, const Tensor& mask, bool is_causal) {
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    // Position i may attend to j <= i: mask the strict upper triangle.
    // Built on the scores' device: no host-to-device copy per call.
    const TensorOptions positions = TensorOptions(kInt64).device(scores.device());
    const Tensor rows = arange(static_cast<double>(scores.size(-2)), positions).unsqueeze(1);
    const Tensor columns = arange(static_cast<double>(scores.size(-1)), positions).unsqueeze(0);
    return masked_fill(scores, gt(columns, rows), minus_infinity);
  }
  if (!mask.defined()) return scores;
  if (mask.dtype() == kBool) return masked_fill(scores, logical_not(mask), minus_infinity);
  return add(scores, mask);
}

// The softmax over the keys, where a row whose every score is -inf (a query whose keys are all
// masked) gets zero weights instead of NaN, as PyTorch's scaled_dot_product_attention gives
// (its safe softmax): such a query attends to nothing, its output is zero and so are the
// gradients through it, so one empty sequence in a batch does not poison the loss. Only a
// mask can empty a row (the causal triangle leaves each query its own key).
Tensor attention_softmax(const Tensor& scores, bool masked) {
  if (!masked) return softmax(scores, -1);
  Tensor empty_rows;
  {
    NoGradGuard no_grad;
    empty_rows = eq(amax(scores.detach(), Shape{-1}, /*keepdim=*/true), -std::numeric_limits<double>::infinity());
  }
  return masked_fill(softmax(masked_fill(scores, empty_rows, 0.0), -1), empty_rows, 0.0);
}

AttentionResult composed_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const AttentionOptions& options) {
  const double scale = scale_of(q, options);

  const Tensor scores = masked_scores(mul(matmul(q, transpose(k, -2, -1)), scale), options.attn_mask,
                                     options.is_causal);  // [..., L, S]
  Tensor weights = attention_softmax(scores, options.attn_mask.defined());
  if (options.dropout_p > 0.0) weights = dropout(weights, options.dropout_p, /*train=*/true);
  return AttentionResult{matmul(weights, v), weights};
}

// Whether the fused kernels cover this call: the device has them, q, k and v share their
// batch dims (a broadcast k or v would need its gradient summed), no input is empty, the
// matrix dims fit BLAS's int, and a float mask needs no gradient.
bool fused_kernels_apply(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  if (!kernels::attention.has(q.device())) return false;
  if (q.dim() != k.dim() || q.dim() != v.dim()) return false;
  for (int64_t d = 0; d + 2 < q.dim(); ++d) {
    if (q.size(d) != k.size(d) || q.size(d) != v.size(d)) return false;
  }
  if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0) return false;
  for (const int64_t size : {q.size(-2), q.size(-1), k.size(-2), v.size(-1)}) {
    if (size > INT_MAX / 2) return false;
  }
  const Tensor& mask = options.attn_mask;
  return !(mask.defined() && mask.requires_grad() && GradMode::is_enabled());
}

// x itself when BLAS can read its matrices (with a leading dimension in int range), else a
// contiguous copy.
Tensor blas_readable(const Tensor& x) {
  const std::optional<cpu::MatrixLayout> layout = cpu::matrix_layout(x);
  return layout && layout->ld <= INT_MAX ? x : contiguous(x);
}

// An uninitialised tensor of `sizes` whose dims lie in memory in the order of `like`'s strides,
// when that order keeps the last dim innermost (else row-major). Attention over heads split
// off as a view, q [B, H, L, E] over [B, L, H * E], then gives its output and gradients in
// [B, L, H * E] order too, and merging the heads again costs no copy.
Tensor empty_in_layout_of(const Tensor& like, const Shape& sizes) {
  const int64_t rank = like.dim();
  std::vector<int64_t> order(rank);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return like.strides()[a] > like.strides()[b]; });
  const Tensor block = make_tensor({numel_of(sizes)}, like.dtype(), like.device());
  if (order.back() != rank - 1) return block.view(sizes);
  Shape strides(rank);
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    strides[order[i]] = stride;
    stride *= sizes[order[i]];
  }
  return make_view(block, sizes, strides, 0);
}

// attention's backward under create_graph, written with differentiable ops (composite, taken
// only then): the fused kernel's gradients would carry no history, and a backward kernel with a
// backward of its own would need the whole second-order algebra fused as well. The weights are
// recomputed from q and k (with the forward's dropout draw); with P the softmax and W = dropout(P):
//   dV = W^T dO,  dW = dO V^T,  dP = dropout(dW),  dS = scale P (dP - rowsum(dP P)),
//   dQ = dS K,  dK = dS^T Q.
std::vector<Tensor> differentiable_attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k,
                                                      const Tensor& v, const kernels::AttentionArgs& args, bool need_q,
                                                      bool need_k, bool need_v) {
  const Tensor scores = masked_scores(mul(matmul(q, transpose(k, -2, -1)), args.scale), args.mask, args.is_causal);
  const Tensor probabilities = attention_softmax(scores, args.mask.defined());
  const bool dropped = args.dropout_p > 0.0;
  const Tensor weights =
      dropped ? dropout_with_state(probabilities, args.dropout_p, args.dropout_state) : probabilities;
  Tensor grad_q, grad_k, grad_v;
  if (need_v) grad_v = matmul(transpose(weights, -2, -1), grad);
  if (need_q || need_k) {
    Tensor grad_weights = matmul(grad, transpose(v, -2, -1));
    if (dropped) grad_weights = dropout_with_state(grad_weights, args.dropout_p, args.dropout_state);
    const Shape rows{scores.dim() - 1};
    const Tensor row_sums = sum(mul(grad_weights, probabilities), rows, /*keepdim=*/true);
    const Tensor grad_scores = mul(mul(probabilities, sub(grad_weights, row_sums)), args.scale);
    if (need_q) grad_q = matmul(grad_scores, k);
    if (need_k) grad_k = matmul(transpose(grad_scores, -2, -1), q);
  }
  return autograd::grads(grad_q, grad_k, grad_v);
}

Tensor fused_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const AttentionOptions& options) {
  kernels::AttentionArgs args;
  args.is_causal = options.is_causal;
  args.scale = scale_of(q_in, options);
  args.dropout_p = options.dropout_p;
  const Shape scores_shape = scores_shape_of(q_in, k_in);
  const int64_t batch = numel_of(Shape(scores_shape.begin(), scores_shape.end() - 2));
  const int64_t target_length = q_in.size(-2), source_length = k_in.size(-2), embed = q_in.size(-1),
                value_embed = v_in.size(-1);
  Tensor q, k, v, out, saved;
  {
    NoGradGuard no_grad;
    q = blas_readable(q_in);
    k = blas_readable(k_in);
    v = blas_readable(v_in);
    if (options.attn_mask.defined()) args.mask = expand(options.attn_mask, scores_shape);
    // The same draw as dropout() on the weights makes: the two forms drop the same weights.
    if (args.dropout_p > 0.0) {
      args.dropout_state = Generator::global().reserve((static_cast<uint64_t>(numel_of(scores_shape)) + 3) / 4,
                                                       q.device().is_cuda() ? DrawOn::kGPU : DrawOn::kCPU);
    }
    Shape out_shape = q.sizes();
    out_shape.back() = value_embed;
    out = empty_in_layout_of(q, out_shape);
  }
  const double products = static_cast<double>(batch) * target_length * source_length;
  if (profiler::is_on()) profiler::add_flops("attention", 2.0 * products * static_cast<double>(embed + value_embed));
  saved = kernels::attention[q.device()](out, q, k, v, args);

  const bool need_q = q_in.requires_grad(), need_k = k_in.requires_grad(), need_v = v_in.requires_grad();
  return autograd::record(
      "attention", out, {q_in, k_in, v_in},
      // q, k and v may be BLAS-readable copies of q_in, k_in and v_in: saved with the inputs'
      // history, which create_graph follows.
      [sq = autograd::save(q, q_in), sk = autograd::save(k, k_in), sv = autograd::save(v, v_in),
       so = autograd::save(out), ss = autograd::save(saved), args, need_q, need_k, need_v, products, embed,
       value_embed](const Tensor& grad) {
        const Tensor &q = sq.get(), &k = sk.get(), &v = sv.get();
        if (GradMode::is_enabled()) return differentiable_attention_backward(grad, q, k, v, args, need_q, need_k, need_v);
        const Tensor grad_out = blas_readable(grad);
        const Tensor grad_q = need_q ? empty_in_layout_of(q, q.sizes()) : Tensor();
        const Tensor grad_k = need_k ? empty_in_layout_of(k, k.sizes()) : Tensor();
        const Tensor grad_v = need_v ? empty_in_layout_of(v, v.sizes()) : Tensor();
        if (profiler::is_on()) {
          // dP = dO v^T, then dV = P^T dO, dQ = dS k and dK = dS^T q for the ones needed.
          const double count = value_embed + (need_v ? value_embed : 0) + (need_q ? embed : 0) + (need_k ? embed : 0);
          profiler::add_flops("attention_backward", 2.0 * products * count);
        }
        kernels::attention_backward[grad_out.device()](grad_q, grad_k, grad_v, grad_out, q, k, v, so.get(), ss.get(),
                                                       args);
        return autograd::grads(grad_q, grad_k, grad_v);
      });
}

// The same options with another mask (autocast's cast of it).
AttentionOptions with_mask(const AttentionOptions& options, const Tensor& mask) {
  AttentionOptions result = options;
  result.attn_mask = mask;
  return result;
}

}  // namespace

AttentionResult scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v,
                                                          const AttentionOptions& options) {
  if (auto cast = autocast::product_operands(q, k, v, options.attn_mask)) {
    const AttentionOptions cast_options = with_mask(options, (*cast)[3]);
    return scaled_dot_product_attention_with_weights((*cast)[0], (*cast)[1], (*cast)[2], cast_options);
  }
  check_attention_inputs(q, k, v, options);
  return composed_attention(q, k, v, options);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  if (auto cast = autocast::product_operands(q, k, v, options.attn_mask)) {
    return scaled_dot_product_attention((*cast)[0], (*cast)[1], (*cast)[2], with_mask(options, (*cast)[3]));
  }
  check_attention_inputs(q, k, v, options);
  if (fused_kernels_apply(q, k, v, options)) return fused_attention(q, k, v, options);
  return composed_attention(q, k, v, options).output;
}

}  // namespace ember
