// matmul, bmm and linear: shape rules, the BLAS-backed CPU gemm kernel and their backward.
// Operands reach BLAS without copies whenever each matrix is row- or column-contiguous.
#include "core/ops/matmul.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <type_traits>

#include "core/autocast.h"
#include "core/autograd/record.h"
#include "core/cpu/bf16_gemm.h"
#include "core/cpu/float16_gemm.h"
#include "core/cpu/blas.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/views.h"
#include "core/profiler.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& a, const Tensor& b, double beta)> gemm{"matmul"};
}  // namespace kernels

namespace {

using cpu::batch_offsets;
using cpu::blas_gemm;
using cpu::matrix_layout;
using cpu::MatrixLayout;

// x itself when BLAS can read its matrices, else a contiguous copy (call without grad).
Tensor blas_operand(const Tensor& x) { return matrix_layout(x) ? x : contiguous(x); }

// Shape/stride helpers on raw views: the forward passes work on views without autograd.
Tensor raw_view(const Tensor& x, const Shape& sizes, const Shape& strides) {
  return make_view(x, sizes, strides, x.storage_offset());
}

Shape batch_of(const Tensor& x) { return Shape(x.sizes().begin(), x.sizes().end() - 2); }

// x [*xb, r, c] seen as [*batch, r, c], with stride 0 along broadcast batch dims.
Tensor expand_batch(const Tensor& x, const Shape& batch) {
  const int64_t rank = static_cast<int64_t>(batch.size()) + 2, lead = rank - x.dim();
  Shape sizes = batch, strides(rank, 0);
  sizes.push_back(x.sizes()[x.dim() - 2]);
  sizes.push_back(x.sizes()[x.dim() - 1]);
  for (int64_t d = std::max<int64_t>(lead, 0); d < rank; ++d) {
    const int64_t xd = d - lead;
    strides[d] = x.sizes()[xd] == 1 && sizes[d] != 1 ? 0 : x.strides()[xd];
  }
  return raw_view(x, sizes, strides);
}

// x [*batch, m, k] as one [batch * m, k] matrix, when its batch dims and rows are laid out
// as one strided dim and the result is BLAS-readable. Lets N-D x 2-D run as a single gemm.
std::optional<Tensor> fold_batch_into_rows(const Tensor& x) {
  const int64_t rank = x.dim();
  int64_t rows = 1, row_stride = 0;
  bool found = false;
  for (int64_t d = rank - 2; d >= 0; --d) {
    const int64_t size = x.sizes()[d];
    if (size == 1) continue;
    if (!found) {
      row_stride = x.strides()[d];
      found = true;
    } else if (x.strides()[d] != row_stride * rows) {
      return std::nullopt;
    }
    rows *= size;
  }
  const Tensor folded = raw_view(x, {rows, x.sizes()[rank - 1]}, {row_stride, x.strides()[rank - 1]});
  if (!matrix_layout(folded)) return std::nullopt;
  return folded;
}

// --- the CPU kernel -------------------------------------------------------------------------

// When to split a batch across threads, one single-threaded gemm per matrix, instead of
// running the gemms one after another on BLAS's own threads. OpenBLAS runs a gemm of up to
// 64^3 multiply-adds on one thread anyway; up to 256^3 its threading gained less than
// splitting the batch did (2 cores, batches of 32: 1.1x at 256^3, 1.3-2x at 32^3..128^3).
constexpr int64_t kSingleThreadedGemm = 64 * 64 * 64;
constexpr int64_t kBatchSplitGemm = 256 * 256 * 256;
constexpr int64_t kBatchSplitMinWork = 1 << 17;

// Runs product(i) for each of the `count` matrices of a batch, each `work` multiply-adds:
// split across the threads, one single-threaded gemm per matrix, when the matrices are many and
// small enough that this beats one gemm after another on the gemm's own threads.
template <class Product>
void for_each_matrix(int64_t count, int64_t work, Product product) {
  if (count == 1) {
    product(0);
    return;
  }
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool split_batch = threads > 1 && count * work >= kBatchSplitMinWork &&
                           (work <= kSingleThreadedGemm || (work <= kBatchSplitGemm && count >= threads));
  if (split_batch) {
    // Inside a parallel region the OpenMP build of OpenBLAS, and ember's bf16_gemm, run each
    // call on one thread.
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < count; ++i) product(i);
  } else {
    for (int64_t i = 0; i < count; ++i) product(i);
  }
}

// The layouts in which BLAS (or bf16_gemm) reads a and b, checked to fit BLAS's int arguments.
// (A struct, not a pair: clang cannot capture a structured binding in an OpenMP region.)
struct OperandLayouts {
  MatrixLayout a, b;
};

OperandLayouts checked_layouts(const Tensor& a, const Tensor& b, int64_t m, int64_t n, int64_t k) {
  EMBER_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "matmul: matrix dims {}x{}x{} exceed the BLAS int range",
              m, k, n);
  const std::optional<MatrixLayout> la = matrix_layout(a), lb = matrix_layout(b);
  EMBER_CHECK(la && lb, "matmul: gemm kernel got an operand that is neither row- nor column-contiguous "
                        "(strides {} and {})", shape_str(a.strides()), shape_str(b.strides()));
  EMBER_CHECK(la->ld <= INT_MAX && lb->ld <= INT_MAX, "matmul: leading dimension exceeds the BLAS int range");
  return {*la, *lb};
}

void gemm_cpu(const Tensor& out, const Tensor& a, const Tensor& b, double beta);

// out (+)= a b for 16-bit operands on ember's own gemms: bfloat16 on AVX512-BF16
// (cpu::bf16_gemm), float16 widened while packed, on float32 FMAs (cpu::float16_gemm). Float32
// sums, rounded once as they are stored into out; with beta != 0 they add to out's values (a
// linear's bias). out is contiguous, as gemm_cpu writes it.
template <class T>
void own_16_bit_gemm_cpu(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  const int64_t rank = out.dim();
  const int64_t m = out.sizes()[rank - 2], n = out.sizes()[rank - 1], k = a.sizes()[rank - 1];
  const int64_t count = numel_of(batch_of(out));
  if (m == 0 || n == 0 || count == 0) return;
  if (k == 0) {  // an empty sum (the operands have no elements, nor a buffer): out = beta * out
    if (beta == 0) std::fill_n(out.data_ptr<T>(), out.numel(), T(0.0f));
    return;
  }
  const OperandLayouts layouts = checked_layouts(a, b, m, n, k);
  const MatrixLayout la = layouts.a, lb = layouts.b;
  const std::vector<int64_t> offsets_a = batch_offsets(a), offsets_b = batch_offsets(b);
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* c = out.data_ptr<T>();
  for_each_matrix(count, m * n * k, [&](int64_t i) {
    const cpu::MatrixOperand<T> left{pa + offsets_a[i], la.ld, la.transposed};
    const cpu::MatrixOperand<T> right{pb + offsets_b[i], lb.ld, lb.transposed};
    if constexpr (std::is_same_v<T, BFloat16>) {
      cpu::bf16_gemm(m, n, k, 1.0f, left, right, static_cast<float>(beta), c + i * m * n, n);
    } else {
      cpu::float16_gemm(m, n, k, 1.0f, left, right, static_cast<float>(beta), c + i * m * n, n);
    }
  });
}

// out (+)= a b for 16-bit operands: ember's own gemms where the CPU has their instructions, else
// the float32 gemm on float32 copies of a and b (see cpu::widened_to_float32), whose result is
// rounded once into out.
void gemm_16_bit_cpu(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  if (out.dtype() == kBFloat16 && cpu::bf16_gemm_in_hardware()) {
    own_16_bit_gemm_cpu<BFloat16>(out, a, b, beta);
    return;
  }
  if (out.dtype() == kFloat16 && cpu::float16_gemm_in_hardware()) {
    own_16_bit_gemm_cpu<Float16>(out, a, b, beta);
    return;
  }
  const Tensor out32 = beta != 0 ? cpu::widened_to_float32(out) : make_tensor(out.sizes(), kFloat32, out.device());
  gemm_cpu(out32, cpu::widened_to_float32(a), cpu::widened_to_float32(b), beta);
  cpu::round_contiguous(out32, out);
}

void gemm_cpu(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  if (is_16_bit_floating_point(out.dtype())) {
    gemm_16_bit_cpu(out, a, b, beta);
    return;
  }
  const int64_t rank = out.dim();
  const int64_t m = out.sizes()[rank - 2], n = out.sizes()[rank - 1], k = a.sizes()[rank - 1];
  const int64_t count = numel_of(batch_of(out));
  if (m == 0 || n == 0 || count == 0) return;
  visit_float32_or_float64(out.dtype(), "matmul", [&]<class T>() {
    T* c = out.data_ptr<T>();
    if (k == 0) {  // an empty sum: BLAS may not touch C at all
      if (beta == 0) std::memset(c, 0, sizeof(T) * count * m * n);
      return;
    }
    const OperandLayouts layouts = checked_layouts(a, b, m, n, k);
    const MatrixLayout la = layouts.a, lb = layouts.b;
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    const std::vector<int64_t> offsets_a = batch_offsets(a), offsets_b = batch_offsets(b);
    for_each_matrix(count, m * n * k, [&](int64_t i) {
      blas_gemm(la.transposed, lb.transposed, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), T(1),
                pa + offsets_a[i], static_cast<int>(la.ld), pb + offsets_b[i], static_cast<int>(lb.ld),
                static_cast<T>(beta), c + i * m * n, static_cast<int>(n));
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::gemm, DeviceType::CPU, gemm_cpu);

// --- argument checks ------------------------------------------------------------------------

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.defined() && b.defined(), "{}: an operand is undefined", op);
  EMBER_CHECK(a.dtype() == b.dtype(), "{}: dtype mismatch: {} and {} (convert one with to() first)", op, a.dtype(),
              b.dtype());
  EMBER_CHECK(a.device() == b.device(), "{}: device mismatch: {} and {} (move one with to() first)", op,
              a.device(), b.device());
  EMBER_CHECK(is_floating_point(a.dtype()),
              "{}: expected floating point tensors (float32, float64, bfloat16 or float16), got {}", op, a.dtype());
}

void check_inner(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  EMBER_CHECK(ka == kb, "{}: shapes {} and {} cannot be multiplied ({} != {})", op, shape_str(a.sizes()),
              shape_str(b.sizes()), ka, kb);
}

// Every matrix product goes through here: out [*, m, n] (+)= a [*, m, k] @ b [*, k, n], counting
// its 2mnk floating-point operations for the profiler.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  if (profiler::is_on()) {
    profiler::add_flops("matmul", 2.0 * static_cast<double>(out.numel()) * static_cast<double>(a.sizes().back()));
  }
  kernels::gemm[a.device()](out, a, b, beta);
}

// --- forward passes (no autograd) -------------------------------------------------------------

// a [*ba, m, k] @ b [*bb, k, n] into a new tensor of `out_shape` (the broadcast [*batch, m, n],
// possibly with a vector operand's dim removed: same elements).
Tensor matmul_forward(const Tensor& a_in, const Tensor& b_in, const Shape& batch, const Shape& out_shape) {
  NoGradGuard no_grad;
  const Tensor a = blas_operand(a_in), b = blas_operand(b_in);
  const int64_t m = a.sizes()[a.dim() - 2], n = b.sizes()[b.dim() - 1];
  Tensor out = make_tensor(out_shape, a.dtype(), a.device());
  if (b.dim() == 2 && a.dim() > 2) {
    if (const std::optional<Tensor> folded = fold_batch_into_rows(a)) {
      const int64_t rows = folded->sizes()[0];
      gemm(raw_view(out, {rows, n}, {n, 1}), *folded, b, 0.0);
      return out;
    }
  }
  Shape full_shape = batch;
  full_shape.push_back(m);
  full_shape.push_back(n);
  gemm(raw_view(out, full_shape, contiguous_strides(full_shape)), expand_batch(a, batch),
                            expand_batch(b, batch), 0.0);
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (auto cast = autocast::product_operands(a, b)) return matmul((*cast)[0], (*cast)[1]);
  check_pair("matmul", a, b);
  EMBER_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least one dim, got shapes {} and {}",
              shape_str(a.sizes()), shape_str(b.sizes()));
  // A vector is a one-row (left) or one-column (right) matrix whose extra dim is dropped after.
  const bool a_vector = a.dim() == 1, b_vector = b.dim() == 1;
  const Tensor a2 = a_vector ? raw_view(a, {1, a.sizes()[0]}, {1, a.strides()[0]}) : a;
  const Tensor b2 = b_vector ? raw_view(b, {b.sizes()[0], 1}, {b.strides()[0], 1}) : b;
  check_inner("matmul", a, b, a2.sizes()[a2.dim() - 1], b2.sizes()[b2.dim() - 2]);
  const Shape batch_a = batch_of(a2), batch_b = batch_of(b2);
  Shape batch;
  try {
    batch = broadcast_shapes(batch_a, batch_b, "matmul");
  } catch (const Error&) {
    fail("matmul: batch dims {} and {} of shapes {} and {} do not broadcast", shape_str(batch_a), shape_str(batch_b),
         shape_str(a.sizes()), shape_str(b.sizes()));
  }
  Shape out_shape = batch;
  if (!a_vector) out_shape.push_back(a2.sizes()[a2.dim() - 2]);
  if (!b_vector) out_shape.push_back(b2.sizes()[b2.dim() - 1]);
  Tensor out = matmul_forward(a2, b2, batch, out_shape);

  // The backward is written with matmul itself (composite): under create_graph it records, so the
  // products have derivatives of every order with no kernel of their own. So are bmm's and linear's.
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record(
      "matmul", out, {a, b},
      [sa = autograd::save(need_b ? a : Tensor()), sb = autograd::save(need_a ? b : Tensor()), need_a, need_b,
       a_vector, b_vector, shape_a = a.sizes(), shape_b = b.sizes()](const Tensor& grad) {
        // Work on the matrix forms: vectors get their unit dim back, and so does the gradient.
        auto as_matrix = [&](const Tensor& x, bool left) {
          return x.dim() != 1 ? x : (left ? unsqueeze(x, 0) : unsqueeze(x, 1));
        };
        Tensor g = grad;
        if (a_vector) g = unsqueeze(g, b_vector ? 0 : g.dim() - 1);
        if (b_vector) g = unsqueeze(g, g.dim());
        Tensor grad_a, grad_b;
        if (need_a) {
          const Tensor b2 = as_matrix(sb.get(), false);
          grad_a = reshape(sum_to(matmul(g, transpose(b2, -1, -2)), a_vector ? Shape{1, shape_a[0]} : shape_a),
                           shape_a);
        }
        if (need_b) {
          const Tensor a2 = as_matrix(sa.get(), true);
          const int64_t k = a2.sizes()[a2.dim() - 1];
          if (a2.dim() > 2 && !b_vector && shape_b.size() == 2) {
            // A 2-D right operand met every matrix of the batch: one gemm over all the rows.
            grad_b = matmul(transpose(reshape(a2, {-1, k}), 0, 1), reshape(g, {-1, g.sizes()[g.dim() - 1]}));
          } else {
            const Shape b_matrix = b_vector ? Shape{shape_b[0], 1} : shape_b;
            grad_b = reshape(sum_to(matmul(transpose(a2, -1, -2), g), b_matrix), shape_b);
          }
        }
        return autograd::grads(grad_a, grad_b);
      });
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (auto cast = autocast::product_operands(a, b)) return bmm((*cast)[0], (*cast)[1]);
  check_pair("bmm", a, b);
  EMBER_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expects two 3-D tensors [B, n, k] and [B, k, m], got shapes {} and {}",
              shape_str(a.sizes()), shape_str(b.sizes()));
  EMBER_CHECK(a.sizes()[0] == b.sizes()[0], "bmm: batch sizes differ: shapes {} and {} ({} != {})",
              shape_str(a.sizes()), shape_str(b.sizes()), a.sizes()[0], b.sizes()[0]);
  check_inner("bmm", a, b, a.sizes()[2], b.sizes()[1]);
  const Shape batch{a.sizes()[0]};
  Tensor out = matmul_forward(a, b, batch, {a.sizes()[0], a.sizes()[1], b.sizes()[2]});
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record("bmm", out, {a, b},
                          [sa = autograd::save(need_b ? a : Tensor()), sb = autograd::save(need_a ? b : Tensor()),
                           need_a, need_b](const Tensor& grad) {
                            Tensor grad_a = need_a ? bmm(grad, transpose(sb.get(), 1, 2)) : Tensor();
                            Tensor grad_b = need_b ? bmm(transpose(sa.get(), 1, 2), grad) : Tensor();
                            return autograd::grads(grad_a, grad_b);
                          });
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (auto cast = autocast::product_operands(x, weight, bias)) {
    return linear((*cast)[0], (*cast)[1], (*cast)[2]);
  }
  check_pair("linear", x, weight);
  EMBER_CHECK(x.dim() >= 1, "linear: input must have at least one dim, got shape {}", shape_str(x.sizes()));
  EMBER_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out_features, in_features], got shape {}",
              shape_str(weight.sizes()));
  const int64_t in_features = weight.sizes()[1], out_features = weight.sizes()[0];
  EMBER_CHECK(x.sizes().back() == in_features,
              "linear: input shape {} does not match weight shape {} (in_features {} != {})", shape_str(x.sizes()),
              shape_str(weight.sizes()), x.sizes().back(), in_features);
  const bool has_bias = bias.defined();
  if (has_bias) {
    check_pair("linear", x, bias);
    EMBER_CHECK(bias.dim() == 1 && bias.sizes()[0] == out_features,
                "linear: bias shape {} does not match weight shape {} (expected [{}])", shape_str(bias.sizes()),
                shape_str(weight.sizes()), out_features);
  }
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  const int64_t rows = numel_of(out_shape);
  out_shape.push_back(out_features);

  Tensor out = make_tensor(out_shape, x.dtype(), x.device());
  {
    NoGradGuard no_grad;
    const Tensor x2 = blas_operand(x.dim() == 2 ? x : reshape(x, {rows, in_features}));
    const Tensor weight_t = blas_operand(raw_view(weight, {in_features, out_features},
                                                  {weight.strides()[1], weight.strides()[0]}));
    const Tensor out2 = raw_view(out, {rows, out_features}, {out_features, 1});
    // The bias is fused: C starts as the broadcast bias and the gemm adds x W^T to it.
    if (has_bias) kernels::copy[out.device()](out2, bias);
    gemm(out2, x2, weight_t, has_bias ? 1.0 : 0.0);
  }

  const bool need_x = x.requires_grad(), need_weight = weight.requires_grad();
  return autograd::record(
      "linear", out, {x, weight, bias},
      [sx = autograd::save(need_weight ? x : Tensor()), sw = autograd::save(need_x ? weight : Tensor()), need_x,
       need_weight, has_bias, shape_x = x.sizes(), rows, in_features, out_features](const Tensor& grad) {
        const Tensor g = reshape(grad, {rows, out_features});
        Tensor grad_x = need_x ? reshape(matmul(g, sw.get()), shape_x) : Tensor();
        Tensor grad_weight = need_weight ? matmul(t(g), reshape(sx.get(), {rows, in_features})) : Tensor();
        Tensor grad_bias = has_bias ? sum(g, {0}) : Tensor();
        return autograd::grads(grad_x, grad_weight, grad_bias);
      });
}

// Tensor member shorthands for the ops above.
Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }

}  // namespace ember
