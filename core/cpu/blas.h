// What the CPU kernels that multiply matrices share: how a BLAS can read a strided matrix
// without a copy, where each matrix of a batch starts, typed cblas_?gemm calls, and the float32
// copies through which 16-bit operands reach them.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/cpu/half_rows.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace ember::cpu {

// How a BLAS reads a matrix held in the last two dims of a tensor: row-major with leading
// dimension `ld`, or (transposed) as the row-major matrix of its transpose.
struct MatrixLayout {
  bool transposed;
  int64_t ld;
};

// The layout of a [rows, cols] matrix with these strides, if a BLAS can take it without a copy.
// A size-1 dim's stride is meaningless, so it never disqualifies a matrix.
inline std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  const int64_t min_row_ld = std::max<int64_t>(cols, 1), min_col_ld = std::max<int64_t>(rows, 1);
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= min_row_ld)) {
    return MatrixLayout{false, rows == 1 ? min_row_ld : row_stride};
  }
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= min_col_ld)) {
    return MatrixLayout{true, cols == 1 ? min_col_ld : col_stride};
  }
  return std::nullopt;
}

// The layout of the matrices in x's last two dims.
inline std::optional<MatrixLayout> matrix_layout(const Tensor& x) {
  const int64_t r = x.dim();
  return matrix_layout(x.sizes()[r - 2], x.sizes()[r - 1], x.strides()[r - 2], x.strides()[r - 1]);
}

// Element offsets of every matrix of x [*batch, r, c] over the batch, in row-major batch order.
inline std::vector<int64_t> batch_offsets(const Tensor& x) {
  const int64_t batch_rank = x.dim() - 2;
  int64_t count = 1;
  for (int64_t d = 0; d < batch_rank; ++d) count *= x.sizes()[d];
  std::vector<int64_t> offsets(count);
  std::vector<int64_t> index(batch_rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    offsets[i] = offset;
    for (int64_t d = batch_rank - 1; d >= 0; --d) {
      offset += x.strides()[d];
      if (++index[d] < x.sizes()[d]) break;
      offset -= x.strides()[d] * x.sizes()[d];
      index[d] = 0;
    }
  }
  return offsets;
}

// C = alpha op(A) op(B) + beta C, all row-major.
inline void blas_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

inline void blas_gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a, int lda,
                      const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

// A float32 copy of a 16-bit x with x's sizes and strides: the span of storage that x reads is
// converted (exactly) into a new buffer, and viewed as x is. Matrix layouts, broadcast batch
// dims (stride 0) and batch offsets stay as they were, so the float32 kernels read the copy as
// they would have read x, and a broadcast matrix is converted once, not once per use.
//
// Why 16-bit products go through float32 on the CPU: OpenBLAS's cblas_sbgemm (bfloat16 in,
// float32 out) is missing from the builds ember links (Debian's 0.3.21 does not export it) and
// there is no float16 gemm at all, while converting costs O(mk + kn) beside the O(mkn) of the
// product. The sums are float32 sums either way, as on GPUs' tensor cores.
inline Tensor widened_to_float32(const Tensor& x) {
  if (x.numel() == 0) return make_tensor(x.sizes(), kFloat32, x.device());
  int64_t span = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    EMBER_CHECK(x.strides()[d] >= 0, "widened_to_float32: negative stride in strides {}", shape_str(x.strides()));
    if (x.sizes()[d] > 1) span += (x.sizes()[d] - 1) * x.strides()[d];
  }
  const Tensor buffer = make_tensor({span}, kFloat32, x.device());
  float* to = buffer.data_ptr<float>();
  visit_any_floating(x.dtype(), "widened_to_float32", [&]<class T>() {
    const T* from = x.data_ptr<T>();
    parallel_for(span, 1, [&](int64_t begin, int64_t end) { widen_row(from + begin, end - begin, to + begin); });
  });
  return make_view(buffer, x.sizes(), x.strides(), 0);
}

// Widens the contiguous 16-bit `from` exactly into the contiguous float32 `to` of the same size.
inline void widen_contiguous(const Tensor& from, const Tensor& to) {
  float* values = to.data_ptr<float>();
  visit_any_floating(from.dtype(), "widen_contiguous", [&]<class T>() {
    const T* narrow = from.data_ptr<T>();
    parallel_for(to.numel(), 1, [&](int64_t begin, int64_t end) {
      widen_row(narrow + begin, end - begin, values + begin);
    });
  });
}

// Rounds the contiguous float32 `from` once into the contiguous 16-bit `to` of the same size.
inline void round_contiguous(const Tensor& from, const Tensor& to) {
  const float* values = from.data_ptr<float>();
  visit_any_floating(to.dtype(), "round_contiguous", [&]<class T>() {
    T* rounded = to.data_ptr<T>();
    parallel_for(to.numel(), 1, [&](int64_t begin, int64_t end) {
      round_row(values + begin, end - begin, rounded + begin);
    });
  });
}

}  // namespace ember::cpu
