// The CPU kernels compiled once per instruction set (core/cpu/isa.h), gathered in one table per
// rung, and the table of the rung in use.
//
// core/cpu/kernels/rung.cpp fills a table from the kernels its rung compiles; it is compiled
// once per rung with that rung's flags, so the library holds five tables, and kernels() returns
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

// The float32 functions the unary ops compute on vector_math.h's approximations.
enum class VectorFunction : uint8_t { kExp, kTanh, kSigmoid, kErf, kGelu, kGeluTanh };

// A row's max, log sum_i e^(x[i] - max), and (where asked) sum_i x[i].
template <class T>
struct LogSumExp {
  T max;
  T log_sum;
  T sum;
};

// The row kernels of softmax, cross_entropy and logsumexp for float32 or float64 (T): on 16-bit
// tensors they run on rows widened to float32.
template <class T>
struct RowKernels {
  // softmax (or log_softmax, `log`) of one contiguous row of n; out may be x. next_x / next_out
  // are the next row's input and output (nullptr for none), prefetched meanwhile.
  void (*softmax_row)(T* out, const T* x, const T* next_x, T* next_out, int64_t n, bool log);
  // softmax along n of `width` neighbouring columns (stride `inner` between a column's
  // elements), with max and sum scratch of width elements; out may be x.
  void (*softmax_columns)(T* out, const T* x, int64_t n, int64_t inner, int64_t width, bool log, T* max, T* sum);
  // out[i] = g[i] - e^(y[i]) * (dots ? dots[i] : dot) for i < n, y a log_softmax's output
  // (log_softmax's backward); out may be g or y.
  void (*log_softmax_gradient)(const T* g, const T* y, int64_t n, T dot, const T* dots, T* out);
  // The row's LogSumExp (its sum only when with_sum), prefetching next_row (nullptr for none),
  // whose elements are next_element_bytes wide.
  LogSumExp<T> (*log_sum_exp_row)(const T* x, int64_t n, bool with_sum, const void* next_row,
                                  int64_t next_element_bytes);
  // out[i] = (e^((x[i] - max) - log_sum) - uniform) * scale.
  void (*softmax_gradient_row)(const T* x, int64_t n, T max, T log_sum, T uniform, T scale, T* out);
  // sum over i < n of e^(x[i] - shift), added up in double.
  double (*sum_exp_shifted)(const T* x, int64_t n, T shift);
  // total[k] += e^(x[k] - shift[k]) for k < width.
  void (*accumulate_exp_shifted)(const T* x, const T* shift, int64_t width, double* total);
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
  // bfloat16 products: on AMX by tdpbf16ps and on AVX512-BF16 in pairs by vdpbf16ps, both of which
  // read subnormal inputs and sums as zero (bf16_flushes_subnormals); below them widened to
  // float32 as they are packed, and multiplied on float32 FMAs, exactly.
  GemmKernels<BFloat16> bf16_gemm;
  bool bf16_flushes_subnormals;
  // float16 products: widened to float32 as they are packed, on float32 FMAs.
  GemmKernels<Float16> float16_gemm;
  // The same products by the scalar C++ the vector kernels of this rung are held to, bit for bit.
  GemmKernels<BFloat16> bf16_gemm_reference;
  // Whether bf16_gemm gives bf16_gemm_reference's bits. Not on AMX, whose order and precision of
  // additions are the hardware's (core/cpu/kernels/tile_kernels.h): there both are held to
  // float32's summation bound instead.
  bool bf16_reference_bitwise;
  GemmKernels<Float16> float16_gemm_reference;
  // out[i] = f(x[i]) for i < n, in float32 (out may be x).
  void (*map_f32)(VectorFunction f, const float* x, int64_t n, float* out);
  // out[i] = grad[i] * f'(x[i]) for f kGelu or kGeluTanh, in float32 (out may be grad or x).
  void (*activation_backward_f32)(VectorFunction f, const float* grad, const float* x, int64_t n, float* out);
  RowKernels<float> rows_f32;
  RowKernels<double> rows_f64;
  // 16-bit rows widened to float32 (exactly) and float32 rounded to them (to nearest even).
  void (*widen_bf16)(const BFloat16* x, int64_t n, float* to);
  void (*widen_f16)(const Float16* x, int64_t n, float* to);
  void (*round_to_bf16)(const float* x, int64_t n, BFloat16* to);
  void (*round_to_f16)(const float* x, int64_t n, Float16* to);
};

// The row kernels for T (float or double) in `table`.
template <class T>
const RowKernels<T>& row_kernels(const KernelTable& table) {
  if constexpr (sizeof(T) == sizeof(float)) return table.rows_f32;
  else return table.rows_f64;
}

// The table of `isa`'s kernels (every rung is compiled; one above the CPU's must not be called).
const KernelTable& kernel_table(CpuIsa isa);

// The table of cpu_isa(), the rung in use. Every CPU kernel's dispatch (core/dispatch.h) takes it
// first, outside any parallel region: the first call throws for a refused EMBER_CPU_ISA, and an
// exception cannot leave an OpenMP region.
const KernelTable& kernels();

// A buffer of at least `bytes`, 64-byte aligned, that persists per thread and per `slot` (0-3) and
// is reused from call to call: the packing buffers of the gemms. Here rather than in the kernels
// so that no rung's compiled copy of the standard library's inline code is shared with another.
void* thread_scratch(int slot, int64_t bytes);

}  // namespace ember::cpu
