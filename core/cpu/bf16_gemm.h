// ember's own bfloat16 matrix product for the CPU: bfloat16 operands, float32 sums, on the vector
// kernels of the instruction set in use (core/cpu/isa.h, core/cpu/kernel_table.h).
//
// Why ember has one: the OpenBLAS builds it links have no bfloat16 gemm (Debian's 0.3.21 exports
// no cblas_sbgemm), so without this a bfloat16 product is float32 sgemm on widened copies of both
// operands, rounded into the result in another pass.
//
// How, by rung:
// - amx_bf16: tdpbf16ps on AMX's tile registers, a 16 x 16 x 32 product per instruction
//   (core/cpu/kernels/tile_kernels.h): about seven times vdpbf16ps's rate on a 2-core Xeon.
//   Subnormals read as zero as below; the sums are the hardware's, at least float32's precision,
//   in an order no scalar reference reproduces bit for bit.
// - avx512_bf16: vdpbf16ps multiplies two pairs of bfloat16 values per float32 lane in one
//   instruction, twice the multiply-adds of a float32 FMA, from operands half the size. Every
//   product of two bfloat16 values is exact in float32 (8-bit significands) and the sums are
//   float32 sums; the one difference from float32 arithmetic is the instruction's: subnormal
//   inputs and results count as zero (DAZ/FTZ), as in every AVX512-BF16 product, oneDNN's
//   (PyTorch's) included. bfloat16's subnormals lie below 1.2e-38, far from any weight or
//   activation of a trained model.
// - avx2, avx512: the operands are widened to float32 as they are packed (which reads every value
//   anyway) and multiplied on float32 FMAs, exactly, subnormals included: sgemm's arithmetic
//   without its float32 copies of the operands, and the result rounded as it is stored.
// - portable: no vector kernel; matmul widens the operands for sgemm.
#pragma once

#include <cstdint>

#include "core/cpu/matrix_operand.h"
#include "core/half.h"

namespace ember::cpu {

// A bfloat16 matrix as the product reads it.
using Bf16Operand = MatrixOperand<BFloat16>;

// Whether the instruction set in use has a vector kernel for bfloat16 products (any rung but
// portable); without one matmul goes through float32 sgemm.
bool bf16_gemm_in_hardware();

// Whether bfloat16 products run on bfloat16 hardware: in pairs on vdpbf16ps (the avx512_bf16
// rung), twice float32's multiply-adds per instruction, or on AMX's tiles (amx_bf16), far more;
// either reads subnormals as zero. Where they do, a bfloat16 step does its products faster than
// float32's; elsewhere at float32's rate.
bool bf16_products_in_pairs();

// c = alpha op(a) op(b) + beta c: op(a) [m, k] and op(b) [k, n] in bfloat16, c [m, n] row-major with
// leading dimension ldc, in float32 or in bfloat16 (the float32 sums rounded once as they are
// stored; beta c read from the bfloat16 values). beta = 0 never reads c. Runs on OpenMP's threads
// unless called inside a parallel region. Without a vector kernel it runs the scalar reference,
// which is correct but slow. Out: float or BFloat16.
template <class Out>
void bf16_gemm(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b, float beta, Out* c,
               int64_t ldc);

// The same through the scalar C++ that the kernel in use is held to bit for bit (the pairs'
// arithmetic written out, or std::fma in k's order): the tests' reference.
template <class Out>
void bf16_gemm_reference(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b, float beta,
                         Out* c, int64_t ldc);

}  // namespace ember::cpu
