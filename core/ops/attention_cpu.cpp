// The fused CPU kernels of scaled_dot_product_attention.
//
// Composed of ops, attention makes a pass over memory for every step: the scores, their
// scaling, the mask, the softmax, the dropout, each a [*batch, L, S] tensor written out and
// read back, and as many again in backward. Fused, each matrix of the batch (one head of one
// sequence) goes through all of them on one thread while its L x S scores are in that core's
// cache, and only the softmax (which backward needs) is written out. The matrix products
// are single-threaded BLAS calls, one matrix per thread, as matmul runs a batch of small
// products.
//
// Forward, for each matrix:   P = softmax(scale q k^T + mask),  W = P * keep / (1 - p),  out = W v
// Backward, from dO:          dV = W^T dO,  dW = dO v^T,  dP = dW * keep / (1 - p),
//                             dS = P * (dP - rowsum(dP * P)) (0 where masked),
//                             dQ = scale dS k,  dK = scale dS^T q
// The dropout mask is not stored: both passes draw it again, as the dropout op does.
//
// 16-bit q, k, v: the softmax, its backward and the softmax saved for backward are float32.
// - Where the instruction set in use has ember's own 16-bit gemms (cpu::bf16_gemm,
//   cpu::float16_gemm; any rung of core/cpu/isa.h above portable): the products take q, k, v and dO as they are, and the weights
//   W and the scores' gradient dS rounded once to q's dtype, as FlashAttention on GPUs and
//   PyTorch's CPU kernel do; their float32 sums are rounded once into out and the gradients. The
//   roundings of W and dS are the only difference from float32 arithmetic, at most 2^-8
//   (bfloat16) or 2^-11 (float16) of each term (tests/test_half_nn_ops.cpp bounds them).
// - otherwise q, k, v (and a float mask of their dtype) are widened to float32 copies on which
//   the float32 kernels run, and the output and the gradients are rounded once.
#include <omp.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cpu/bf16_gemm.h"
#include "core/cpu/float16_gemm.h"
#include "core/cpu/blas.h"
#include "core/cpu/half_rows.h"
#include "core/cpu/kernel_table.h"
#include "core/ops/attention.h"
#include "core/ops/copy.h"

namespace ember {
namespace {

// One operand of the batch: where each of its matrices starts and how BLAS reads them.
template <class T>
struct BatchOperand {
  T* data = nullptr;
  std::vector<int64_t> offsets;
  cpu::MatrixLayout layout{false, 0};

  BatchOperand() = default;
  explicit BatchOperand(const Tensor& x)
      : data(x.data_ptr<T>()), offsets(cpu::batch_offsets(x)), layout(*cpu::matrix_layout(x)) {}

  T* matrix(int64_t i) const { return data + offsets[i]; }
  bool transposed() const { return layout.transposed; }
  int64_t ld() const { return layout.ld; }
};

// Which scores a row keeps: the causal triangle, a bool mask's true entries, or all of them
// (an additive mask keeps every score and shifts it).
template <class T>
class RowMask {
 public:
  explicit RowMask(const kernels::AttentionArgs& args) : causal_(args.is_causal) {
    const Tensor& mask = args.mask;
    if (!mask.defined()) return;
    offsets_ = cpu::batch_offsets(mask);
    row_stride_ = mask.strides()[mask.dim() - 2];
    column_stride_ = mask.strides()[mask.dim() - 1];
    if (mask.dtype() == kBool) {
      allowed_ = mask.data_ptr<bool>();
    } else {
      added_ = mask.data_ptr<T>();
    }
  }

  // Applies the mask to row i of matrix n of the scores: -inf where a key may not be seen,
  // the additive mask's value added elsewhere.
  void apply(T* scores, int64_t n, int64_t i, int64_t length) const {
    const T minus_infinity = -std::numeric_limits<T>::infinity();
    if (causal_) {
      for (int64_t j = i + 1; j < length; ++j) scores[j] = minus_infinity;
    } else if (allowed_ != nullptr) {
      const bool* allowed = allowed_ + offsets_[n] + i * row_stride_;
      for (int64_t j = 0; j < length; ++j) {
        if (!allowed[j * column_stride_]) scores[j] = minus_infinity;
      }
    } else if (added_ != nullptr) {
      const T* added = added_ + offsets_[n] + i * row_stride_;
      for (int64_t j = 0; j < length; ++j) scores[j] += added[j * column_stride_];
    }
  }

  // Whether a row can have every key masked: with a mask (bool, or additive with -inf), not
  // with the causal triangle alone.
  bool may_empty_a_row() const { return allowed_ != nullptr || added_ != nullptr; }

  // Zeroes the gradient of the scores that the mask replaced by -inf (masked_fill's backward).
  void zero_masked(T* grad, int64_t n, int64_t i, int64_t length) const {
    if (causal_) {
      for (int64_t j = i + 1; j < length; ++j) grad[j] = 0;
    } else if (allowed_ != nullptr) {
      const bool* allowed = allowed_ + offsets_[n] + i * row_stride_;
      for (int64_t j = 0; j < length; ++j) {
        if (!allowed[j * column_stride_]) grad[j] = 0;
      }
    }
  }

 private:
  bool causal_;
  const bool* allowed_ = nullptr;  // a bool mask
  const T* added_ = nullptr;       // an additive mask
  std::vector<int64_t> offsets_;
  int64_t row_stride_ = 0, column_stride_ = 0;
};

// C = alpha op(A) op(B) for one matrix of the batch (dims checked to fit BLAS's int by the op):
// BLAS for float32 and float64 operands; for 16-bit operands ember's own gemms, whose float32
// sums go into a float32 C (scores) or are rounded once into a 16-bit one (out, gradients).
template <class T>
void product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
             const T* b, int64_t ldb, T* c, int64_t ldc) {
  cpu::blas_gemm(trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
                 static_cast<int>(lda), b, static_cast<int>(ldb), T(0), c, static_cast<int>(ldc));
}

template <class Out>
void product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a,
             int64_t lda, const BFloat16* b, int64_t ldb, Out* c, int64_t ldc) {
  cpu::bf16_gemm(m, n, k, alpha, {a, lda, trans_a}, {b, ldb, trans_b}, 0.0f, c, ldc);
}

template <class Out>
void product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const Float16* a,
             int64_t lda, const Float16* b, int64_t ldb, Out* c, int64_t ldc) {
  cpu::float16_gemm(m, n, k, alpha, {a, lda, trans_a}, {b, ldb, trans_b}, 0.0f, c, ldc);
}

// count values of the kernel's arithmetic type C (the weights, the scores' gradient) as an
// operand of a product on operands of type T: the values themselves, or for 16-bit operands a
// copy rounded once into `rounded`.
template <class T, class C>
const T* as_operand(const C* values, int64_t count, T* rounded) {
  if constexpr (std::is_same_v<T, C>) {
    return values;
  } else {
    cpu::round_row(values, count, rounded);
    return rounded;
  }
}

// factors[j] = 1 / (1 - p) if the dropout op keeps element first + j of the weights, else 0:
// word (first + j) of the draw, as apply_dropout_mask_cpu reads it.
template <class T>
void dropout_factors(const PhiloxState& state, int64_t first, int64_t count, double p, T* factors) {
  constexpr int kBlock = 64;
  alignas(64) uint32_t words[4 * kBlock];
  const float threshold = static_cast<float>(p);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - p));
  for (int64_t done = 0; done < count;) {
    const int64_t element = first + done;
    const int64_t counter = element / 4;
    cpu::kernels().philox4x32_counters(state.seed, state.offset + static_cast<uint64_t>(counter), kBlock, words);
    const int64_t skip = element - 4 * counter;
    const int64_t take = std::min<int64_t>(4 * kBlock - skip, count - done);
    for (int64_t j = 0; j < take; ++j) {
      factors[done + j] = static_cast<T>(uniform_float(words[skip + j]) >= threshold) * keep_scale;
    }
    done += take;
  }
}

// Runs body(n, scratch, rounded) for each of `count` matrices: one matrix per thread with the
// products single-threaded inside, when there are enough matrices and work to share; otherwise
// one after another, the products using all threads. Each thread gets `scratch_size` elements of
// scratch of the arithmetic type C and `rounded_size` of the operand type T, from ember's caching
// allocator.
template <class T, class C, class Body>
void for_each_matrix(int64_t count, int64_t work_per_matrix, int64_t scratch_size, int64_t rounded_size, Body body) {
  constexpr int64_t kMinWorkToSplit = 1 << 15;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool split = threads > 1 && count >= threads && count * work_per_matrix >= kMinWorkToSplit;
  const int teams = split ? threads : 1;
  const Tensor scratch = make_tensor({std::max<int64_t>(teams * scratch_size, 1)}, dtype_of<C>(), Device());
  const Tensor rounded = make_tensor({std::max<int64_t>(teams * rounded_size, 1)}, dtype_of<T>(), Device());
  C* const scratch_data = scratch.data_ptr<C>();
  T* const rounded_data = rounded.data_ptr<T>();
#pragma omp parallel for if (split) num_threads(teams) schedule(static)
  for (int64_t n = 0; n < count; ++n) {
    body(n, scratch_data + omp_get_thread_num() * scratch_size, rounded_data + omp_get_thread_num() * rounded_size);
  }
}

// The arguments with a 16-bit additive mask widened to float32, for the float32 kernels.
kernels::AttentionArgs with_float32_mask(const kernels::AttentionArgs& args) {
  kernels::AttentionArgs widened = args;
  if (args.mask.defined() && is_16_bit_floating_point(args.mask.dtype())) {
    widened.mask = cpu::widened_to_float32(args.mask);
  }
  return widened;
}

// A float32 tensor for the float32 kernels to write what is then rounded into `like`, or an
// undefined one for an undefined `like` (a gradient not wanted).
Tensor float32_result_for(const Tensor& like) {
  return like.defined() ? make_tensor(like.sizes(), kFloat32, like.device()) : Tensor();
}

// Rounds a float32 result once into its 16-bit tensor.
void round_into(const Tensor& result, const Tensor& result32) {
  if (result.defined()) kernels::copy[result.device()](result, result32);
}

// The forward on operands of type T (float64, float32, or bfloat16 with C = float32): writes out
// and the softmax, probs, [*batch, L, S] of the arithmetic type C.
template <class T, class C = compute_type<T>>
void attention_forward(const Tensor& out, const Tensor& q_tensor, const Tensor& k_tensor, const Tensor& v_tensor,
                       const Tensor& probs, const kernels::AttentionArgs& args) {
  const BatchOperand<T> q(q_tensor), k(k_tensor), v(v_tensor), o(out);
  const RowMask<C> mask(args);
  const int64_t L = q_tensor.size(-2), E = q_tensor.size(-1), S = k_tensor.size(-2), Ev = v_tensor.size(-1);
  const bool dropout = args.dropout_p > 0.0;
  C* const all_probs = probs.data_ptr<C>();
  const int64_t matrices = static_cast<int64_t>(q.offsets.size());
  const int64_t rounded_size = std::is_same_v<T, C> ? 0 : L * S;
  const cpu::RowKernels<C>& rows = cpu::row_kernels<C>(cpu::kernels());
  for_each_matrix<T, C>(matrices, L * S * (E + Ev), dropout ? L * S : 0, rounded_size,
                        [&](int64_t n, C* weights, T* rounded) {
    C* const p = all_probs + n * L * S;
    product(q.transposed(), !k.transposed(), L, S, E, static_cast<C>(args.scale), q.matrix(n), q.ld(), k.matrix(n),
            k.ld(), p, S);
    for (int64_t i = 0; i < L; ++i) {
      C* const row = p + i * S;
      mask.apply(row, n, i, S);
      // A query whose keys are all masked attends to nothing: zero weights, so a zero output
      // and, in backward, zero gradients (the composed form's attention_softmax).
      const auto masked_out = [](C score) { return score == -std::numeric_limits<C>::infinity(); };
      if (mask.may_empty_a_row() && std::all_of(row, row + S, masked_out)) {
        std::fill_n(row, S, C(0));
      } else {
        rows.softmax_row(row, row, nullptr, nullptr, S, /*log=*/false);
      }
    }
    if (dropout) {
      dropout_factors(args.dropout_state, n * L * S, L * S, args.dropout_p, weights);
#pragma omp simd
      for (int64_t e = 0; e < L * S; ++e) weights[e] *= p[e];
    }
    product(false, v.transposed(), L, Ev, S, C(1), as_operand(dropout ? weights : p, L * S, rounded), S, v.matrix(n),
            v.ld(), o.matrix(n), o.ld());
  });
}

// Whether 16-bit attention runs its products on 16-bit operands (ember's own gemms) rather than
// on float32 copies: where the instruction set in use has their vector kernels. Every entry point
// asks, so the kernel table is resolved (or EMBER_CPU_ISA refused) here, before any parallel
// region reads it.
bool own_16_bit_products(const Tensor& q) {
  const cpu::KernelTable& kernels = cpu::kernels();
  return is_16_bit_floating_point(q.dtype()) && kernels.vector_gemms;
}

// Returns the softmax, which the backward reads (float32 for 16-bit inputs).
Tensor attention_cpu(const Tensor& out, const Tensor& q_tensor, const Tensor& k_tensor, const Tensor& v_tensor,
                     const kernels::AttentionArgs& args) {
  Shape probs_shape = q_tensor.sizes();  // [*batch, L, S]: q, k and v share their batch dims here
  probs_shape.back() = k_tensor.size(-2);
  if (own_16_bit_products(q_tensor)) {
    const Tensor probs = make_tensor(probs_shape, kFloat32, q_tensor.device());
    visit_any_floating(q_tensor.dtype(), "attention", [&]<class T>() {
      if constexpr (!std::is_same_v<T, compute_type<T>>) {
        attention_forward<T>(out, q_tensor, k_tensor, v_tensor, probs, with_float32_mask(args));
      }
    });
    return probs;
  }
  if (is_16_bit_floating_point(q_tensor.dtype())) {
    const Tensor out32 = float32_result_for(out);
    const Tensor probs = attention_cpu(out32, cpu::widened_to_float32(q_tensor), cpu::widened_to_float32(k_tensor),
                                       cpu::widened_to_float32(v_tensor), with_float32_mask(args));
    round_into(out, out32);
    return probs;
  }
  const Tensor probs = make_tensor(probs_shape, q_tensor.dtype(), q_tensor.device());
  visit_float32_or_float64(q_tensor.dtype(), "attention", [&]<class T>() {
    attention_forward<T>(out, q_tensor, k_tensor, v_tensor, probs, args);
  });
  return probs;
}
EMBER_REGISTER_KERNEL(kernels::attention, DeviceType::CPU, attention_cpu);

// The backward on operands of type T, the softmax of type C (see attention_forward).
template <class T, class C = compute_type<T>>
void attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                        const Tensor& q_tensor, const Tensor& k_tensor, const Tensor& v_tensor, const Tensor& probs,
                        const kernels::AttentionArgs& args) {
  const BatchOperand<T> q(q_tensor), k(k_tensor), v(v_tensor), d_out(grad_out);
  const BatchOperand<T> d_q = grad_q.defined() ? BatchOperand<T>(grad_q) : BatchOperand<T>();
  const BatchOperand<T> d_k = grad_k.defined() ? BatchOperand<T>(grad_k) : BatchOperand<T>();
  const BatchOperand<T> d_v = grad_v.defined() ? BatchOperand<T>(grad_v) : BatchOperand<T>();
  const RowMask<C> mask(args);
  const int64_t L = q_tensor.size(-2), E = q_tensor.size(-1), S = k_tensor.size(-2), Ev = v_tensor.size(-1);
  const bool dropout = args.dropout_p > 0.0;
  const bool need_scores = grad_q.defined() || grad_k.defined();
  const C* const all_probs = probs.data_ptr<C>();
  const C scale = static_cast<C>(args.scale);
  const int64_t matrices = static_cast<int64_t>(q.offsets.size());
  // Scratch: the scores' gradient, and with dropout the keep factors and the weights; for
  // bfloat16 operands, the weights' and then the scores' gradient's rounded copy.
  const int64_t scratch = L * S * (dropout ? 3 : 1);
  const int64_t rounded_size = std::is_same_v<T, C> ? 0 : L * S;
  for_each_matrix<T, C>(matrices, L * S * 2 * (E + Ev), scratch, rounded_size, [&](int64_t n, C* buffer, T* rounded) {
    const C* const p = all_probs + n * L * S;
    C* const grad_scores = buffer;
    C* const factors = buffer + L * S;
    C* const weights = buffer + 2 * L * S;
    if (dropout) {
      dropout_factors(args.dropout_state, n * L * S, L * S, args.dropout_p, factors);
#pragma omp simd
      for (int64_t e = 0; e < L * S; ++e) weights[e] = p[e] * factors[e];
    }
    if (grad_v.defined()) {
      product(true, d_out.transposed(), S, Ev, L, C(1), as_operand(dropout ? weights : p, L * S, rounded), S,
              d_out.matrix(n), d_out.ld(), d_v.matrix(n), d_v.ld());
    }
    if (!need_scores) return;
    product(d_out.transposed(), !v.transposed(), L, S, Ev, C(1), d_out.matrix(n), d_out.ld(), v.matrix(n), v.ld(),
            grad_scores, S);
    for (int64_t i = 0; i < L; ++i) {
      C* const g = grad_scores + i * S;
      const C* const p_row = p + i * S;
      if (dropout) {
        const C* const f = factors + i * S;
#pragma omp simd
        for (int64_t j = 0; j < S; ++j) g[j] *= f[j];
      }
      C dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < S; ++j) dot += g[j] * p_row[j];
#pragma omp simd
      for (int64_t j = 0; j < S; ++j) g[j] = p_row[j] * (g[j] - dot);
      mask.zero_masked(g, n, i, S);
    }
    const T* const d_scores = as_operand(grad_scores, L * S, rounded);
    if (grad_q.defined()) {
      product(false, k.transposed(), L, E, S, scale, d_scores, S, k.matrix(n), k.ld(), d_q.matrix(n), d_q.ld());
    }
    if (grad_k.defined()) {
      product(true, q.transposed(), S, E, L, scale, d_scores, S, q.matrix(n), q.ld(), d_k.matrix(n), d_k.ld());
    }
  });
}

void attention_backward_cpu(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                            const Tensor& grad_out, const Tensor& q_tensor, const Tensor& k_tensor,
                            const Tensor& v_tensor, const Tensor& out, const Tensor& probs,
                            const kernels::AttentionArgs& args) {
  if (own_16_bit_products(q_tensor)) {
    visit_any_floating(q_tensor.dtype(), "attention_backward", [&]<class T>() {
      if constexpr (!std::is_same_v<T, compute_type<T>>) {
        attention_backward<T>(grad_q, grad_k, grad_v, grad_out, q_tensor, k_tensor, v_tensor, probs,
                              with_float32_mask(args));
      }
    });
    return;
  }
  if (is_16_bit_floating_point(q_tensor.dtype())) {
    const Tensor grad_q32 = float32_result_for(grad_q), grad_k32 = float32_result_for(grad_k),
                 grad_v32 = float32_result_for(grad_v);
    attention_backward_cpu(grad_q32, grad_k32, grad_v32, cpu::widened_to_float32(grad_out),
                           cpu::widened_to_float32(q_tensor), cpu::widened_to_float32(k_tensor),
                           cpu::widened_to_float32(v_tensor), out, probs, with_float32_mask(args));
    round_into(grad_q, grad_q32);
    round_into(grad_k, grad_k32);
    round_into(grad_v, grad_v32);
    return;
  }
  visit_float32_or_float64(q_tensor.dtype(), "attention_backward", [&]<class T>() {
    attention_backward<T>(grad_q, grad_k, grad_v, grad_out, q_tensor, k_tensor, v_tensor, probs, args);
  });
}
EMBER_REGISTER_KERNEL(kernels::attention_backward, DeviceType::CPU, attention_backward_cpu);

}  // namespace
}  // namespace ember
