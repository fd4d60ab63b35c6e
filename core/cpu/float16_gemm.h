// ember's own float16 matrix product for the CPU: float16 operands widened to float32 as they are
// packed, float32 FMAs, the result rounded once as it is stored; on the vector kernels of the
// instruction set in use (core/cpu/isa.h: AVX2 or AVX-512).
//
// Why: no CPU here multiplies float16 natively (AVX512-FP16 is not on these machines) and no
// BLAS ember links takes float16, so without this a float16 product is sgemm on float32 copies of
// both operands, rounded into the result in another pass. Widening inside the packing (which
// reads every operand value anyway) and rounding inside the store removes those passes; the
// multiply-adds are float32 FMAs at sgemm's rate. Products of float16 values are exact in float32
// (11-bit significands), so the sums are float32 sums of the exact products, subnormals
// included.
#pragma once

#include <cstdint>

#include "core/cpu/matrix_operand.h"
#include "core/half.h"

namespace ember::cpu {

using Float16Operand = MatrixOperand<Float16>;

// Whether the instruction set in use has the vector kernel (any rung but portable); without it
// matmul keeps the float32 copies and sgemm.
bool float16_gemm_in_hardware();

// c = alpha op(a) op(b) + beta c: op(a) [m, k] and op(b) [k, n] in float16, c [m, n] row-major
// with leading dimension ldc, in float32 or float16 (rounded once as it is stored; beta c read
// from the float16 values). beta = 0 never reads c. Runs on OpenMP's threads unless called
// inside a parallel region. Out: float or Float16.
template <class Out>
void float16_gemm(int64_t m, int64_t n, int64_t k, float alpha, Float16Operand a, Float16Operand b, float beta, Out* c,
                  int64_t ldc);

// The same through the scalar C++ (std::fma in the vector kernel's order) that the kernel in use
// is held to, bit for bit: the tests' reference.
template <class Out>
void float16_gemm_reference(int64_t m, int64_t n, int64_t k, float alpha, Float16Operand a, Float16Operand b,
                            float beta, Out* c, int64_t ldc);

}  // namespace ember::cpu
