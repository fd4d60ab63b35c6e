// ember's own bfloat16 matrix product for the CPU: bfloat16 operands, float32 sums, on the
// AVX512-BF16 instruction vdpbf16ps where the build has it.
//
// Why ember has one: the OpenBLAS builds it links have no bfloat16 gemm (Debian's 0.3.21 exports
// no cblas_sbgemm), so without this a bfloat16 product is float32 sgemm on widened copies, at
// float32's speed. vdpbf16ps multiplies two pairs of bfloat16 values per float32 lane in one
// instruction, twice the multiply-adds of a float32 FMA, from operands half the size.
//
// What it computes. Every product of two bfloat16 values is exact in float32 (8-bit
// significands); the sums are float32 sums, as sgemm's and the GPU tensor cores' are. The one
// difference from float32 arithmetic is the instruction's: subnormal inputs and results count as
// zero (DAZ/FTZ), as in every AVX512-BF16 product, oneDNN's (PyTorch's) included. bfloat16's
// subnormals lie below 1.2e-38, far from any weight or activation of a trained model.
#pragma once

#include <cstdint>

#include "core/cpu/matrix_operand.h"
#include "core/half.h"

namespace ember::cpu {

// A bfloat16 matrix as the product reads it.
using Bf16Operand = MatrixOperand<BFloat16>;

// Whether this build multiplies bfloat16 matrices on AVX512-BF16: ember compiles for the building
// machine's CPU (EMBER_NATIVE), and the instruction is there when that CPU has it. A function, not
// a constant: only the library is compiled for that CPU, not the programs that include this.
bool bf16_gemm_in_hardware();

// c = alpha op(a) op(b) + beta c: op(a) [m, k] and op(b) [k, n] in bfloat16, c [m, n] row-major with
// leading dimension ldc, in float32 or in bfloat16 (the float32 sums rounded once as they are
// stored; beta c read from the bfloat16 values). beta = 0 never reads c. Runs on OpenMP's threads
// unless called inside a parallel region. Without the instruction in the build it runs the
// portable micro-kernel, which is correct but slow: matmul then goes through float32 sgemm.
// Out: float or BFloat16.
template <class Out>
void bf16_gemm(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b, float beta, Out* c,
               int64_t ldc);

// The same through the portable micro-kernel whatever the build: the reference the tests hold
// the vector kernel to, and how they check the packing and blocking on any CPU.
template <class Out>
void bf16_gemm_portable(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b, float beta,
                        Out* c, int64_t ldc);

}  // namespace ember::cpu
