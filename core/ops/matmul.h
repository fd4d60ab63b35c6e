// Matrix products, through BLAS on the CPU and cuBLAS on the GPU.
#pragma once

#include "core/tensor.h"

namespace ember {

// torch.matmul semantics: 1-D x 1-D is a dot product; 2-D x 2-D a matrix product; a 1-D
// operand is treated as a row (left) or column (right) vector and that dim removed after;
// higher ranks are batches of matrices whose batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// [B, n, k] x [B, k, m] -> [B, n, m]; no broadcasting.
Tensor bmm(const Tensor& a, const Tensor& b);
// x W^T + b with x [..., in], weight [out, in], bias [out] (optional: pass an undefined
// Tensor); the bias add is fused into the product.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace ember
