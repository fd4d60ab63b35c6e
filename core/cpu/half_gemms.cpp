// The bfloat16 and float16 products of core/cpu/bf16_gemm.h and core/cpu/float16_gemm.h, through
// the kernel table of the instruction set in use (the kernels are in core/cpu/kernels/).
#include <type_traits>

#include "core/cpu/bf16_gemm.h"
#include "core/cpu/float16_gemm.h"
#include "core/cpu/kernel_table.h"

namespace ember::cpu {
namespace {

template <class In, class Out>
void run(const GemmKernels<In>& kernels, int64_t m, int64_t n, int64_t k, float alpha, MatrixOperand<In> a,
         MatrixOperand<In> b, float beta, Out* c, int64_t ldc) {
  if constexpr (std::is_same_v<Out, float>) {
    kernels.to_float(m, n, k, alpha, a, b, beta, c, ldc);
  } else {
    kernels.to_same(m, n, k, alpha, a, b, beta, c, ldc);
  }
}

}  // namespace

bool bf16_gemm_in_hardware() { return kernels().vector_gemms; }
bool bf16_products_in_pairs() { return kernels().bf16_flushes_subnormals; }
bool float16_gemm_in_hardware() { return kernels().vector_gemms; }

template <class Out>
void bf16_gemm(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b, float beta, Out* c,
               int64_t ldc) {
  run(kernels().bf16_gemm, m, n, k, alpha, a, b, beta, c, ldc);
}

template <class Out>
void bf16_gemm_reference(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b, float beta,
                         Out* c, int64_t ldc) {
  run(kernels().bf16_gemm_reference, m, n, k, alpha, a, b, beta, c, ldc);
}

template <class Out>
void float16_gemm(int64_t m, int64_t n, int64_t k, float alpha, Float16Operand a, Float16Operand b, float beta, Out* c,
                  int64_t ldc) {
  run(kernels().float16_gemm, m, n, k, alpha, a, b, beta, c, ldc);
}

template <class Out>
void float16_gemm_reference(int64_t m, int64_t n, int64_t k, float alpha, Float16Operand a, Float16Operand b,
                            float beta, Out* c, int64_t ldc) {
  run(kernels().float16_gemm_reference, m, n, k, alpha, a, b, beta, c, ldc);
}

#define EMBER_INSTANTIATE_GEMM(name, In, Out) \
  template void name(int64_t, int64_t, int64_t, float, MatrixOperand<In>, MatrixOperand<In>, float, Out*, int64_t);
EMBER_INSTANTIATE_GEMM(bf16_gemm, BFloat16, float)
EMBER_INSTANTIATE_GEMM(bf16_gemm, BFloat16, BFloat16)
EMBER_INSTANTIATE_GEMM(bf16_gemm_reference, BFloat16, float)
EMBER_INSTANTIATE_GEMM(bf16_gemm_reference, BFloat16, BFloat16)
EMBER_INSTANTIATE_GEMM(float16_gemm, Float16, float)
EMBER_INSTANTIATE_GEMM(float16_gemm, Float16, Float16)
EMBER_INSTANTIATE_GEMM(float16_gemm_reference, Float16, float)
EMBER_INSTANTIATE_GEMM(float16_gemm_reference, Float16, Float16)
#undef EMBER_INSTANTIATE_GEMM

}  // namespace ember::cpu
