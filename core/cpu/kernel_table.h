// The CPU kernels compiled once per instruction set (core/cpu/isa.h), gathered in one table per
// rung, and the table of the rung in use.
//
// core/cpu/kernels/rung.cpp fills a table from the kernels its rung compiles; it is compiled
// once per rung with that rung's flags, so the library holds four tables, and kernels() returns
// the one cpu_isa() chose. Callers take the table before a parallel region (the first call may
// throw, for a refused EMBER_CPU_ISA, and an exception cannot leave an OpenMP region).
#pragma once

#include <cstdint>

#include "core/cpu/isa.h"
#include "core/cpu/matrix_operand.h"
#include "core/half.h"

namespace ember::cpu {

// c = alpha op(a) op(b) + beta c: op(a) [m, k] and op(b) [k, n] of type In, c [m, n] row-major
// with leading dimension ldc, in float32 or In (rounded once as it is stored; beta c read from
// its values; beta = 0 never reads c). Runs on OpenMP's threads unless called inside a parallel
// region.
template <class In, class Out>
using GemmKernel = void (*)(int64_t m, int64_t n, int64_t k, float alpha, MatrixOperand<In> a, MatrixOperand<In> b,
                            float beta, Out* c, int64_t ldc);

template <class In>
struct GemmKernels {
  GemmKernel<In, float> to_float;
  GemmKernel<In, In> to_same;  // c of In's type
};

struct KernelTable {
  CpuIsa isa;
  // words[4 j + w] = word w of philox4x32(key, first_counter + j) (core/random.h), j < counters.
  void (*philox4x32_counters)(uint64_t key, uint64_t first_counter, int64_t counters, uint32_t* words);
  // Dropout's keep bits for the 4 counters elements drawn from counters first_counter...:
  // bit e % 32 of bits[e / 32] is whether word e >> 8 >= threshold, that is whether
  // uniform_float(word e) >= p for threshold = ceil(p 2^24) (core/ops/dropout.cpp). counters is a
  // multiple of 8.
  void (*dropout_keep_bits)(uint64_t key, uint64_t first_counter, int64_t counters, uint32_t threshold,
                            uint32_t* bits);
  // out[i] = x[i] * (bit i % 32 of bits[i / 32] ? scale : 0), i < count: dropout applied from its
  // bits (the product with 0 kept: a dropped NaN or infinity gives NaN). bits starts at element 0
  // of a 32-element word.
  void (*apply_keep_bits)(const float* x, const uint32_t* bits, int64_t count, float scale, float* out);
  // Whether the gemms below run on vector kernels. Where they do not (the portable rung) they
  // are the scalar reference, correct but slow, and matmul widens the operands for sgemm instead.
  bool vector_gemms;
  // bfloat16 products: on AVX512-BF16 in pairs by vdpbf16ps, which reads subnormal inputs and
  // sums as zero (bf16_flushes_subnormals); below it widened to float32 as they are packed, and
  // multiplied on float32 FMAs, exactly.
  GemmKernels<BFloat16> bf16_gemm;
  bool bf16_flushes_subnormals;
  // float16 products: widened to float32 as they are packed, on float32 FMAs.
  GemmKernels<Float16> float16_gemm;
  // The same products by the scalar C++ the vector kernels of this rung are held to, bit for bit.
  GemmKernels<BFloat16> bf16_gemm_reference;
  GemmKernels<Float16> float16_gemm_reference;
};

// The table of `isa`'s kernels (every rung is compiled; one above the CPU's must not be called).
const KernelTable& kernel_table(CpuIsa isa);

// The table of cpu_isa(), the rung in use.
const KernelTable& kernels();

// A buffer of at least `bytes`, 64-byte aligned, that persists per thread and per `slot` (0-3) and
// is reused from call to call: the packing buffers of the gemms. Here rather than in the kernels
// so that no rung's compiled copy of the standard library's inline code is shared with another.
void* thread_scratch(int slot, int64_t bytes);

}  // namespace ember::cpu
