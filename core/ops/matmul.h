// Matrix products, through BLAS on the CPU and cuBLAS on the GPU.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// The one kernel behind matmul, bmm and linear: out = a @ b + beta * out, matrix by matrix.
//   a [*batch, m, k], b [*batch, k, n], out [*batch, m, n], all of the same rank (>= 2) and
//   the same batch dims; same floating dtype and device.
//   out is contiguous. a and b may have any batch strides (0 where a batch dim was
//   broadcast), but each matrix is row-contiguous (stride[-1] == 1) or column-contiguous
//   (stride[-2] == 1), so a BLAS can take it as is, transposed or not: the op copies an
//   operand that is neither before calling. beta is 0 (out's old values are ignored, even
//   NaN) or 1 (linear's bias, written into out beforehand).
// A backend with a strided-batched gemm can use it whenever every batch dim of an operand
// shares one stride; the CPU kernel loops over the batch.
extern KernelTable<void(const Tensor& out, const Tensor& a, const Tensor& b, double beta)> gemm;
}  // namespace kernels

// torch.matmul semantics: 1-D x 1-D is a dot product; 2-D x 2-D a matrix product; a 1-D
// operand is treated as a row (left) or column (right) vector and that dim removed after;
// higher ranks are batches of matrices whose batch dims broadcast. Floating dtypes only.
Tensor matmul(const Tensor& a, const Tensor& b);
// [B, n, k] x [B, k, m] -> [B, n, m]; no broadcasting.
Tensor bmm(const Tensor& a, const Tensor& b);
// x W^T + b with x [..., in], weight [out, in], bias [out] (optional: pass an undefined
// Tensor); the bias add is fused into the product.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace ember
