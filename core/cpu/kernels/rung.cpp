// One rung's table of kernels (core/cpu/kernel_table.h). CMakeLists.txt compiles this file once
// per rung of core/cpu/isa.h, each time with that rung's instruction-set flags and with
// EMBER_CPU_KERNELS naming the rung's namespace:
//
//   isa_portable      no flags beyond x86-64's baseline
//   isa_avx2          -mavx2 -mfma -mf16c
//   isa_avx512        the above and -mavx512f -mavx512bw -mavx512vl
//   isa_avx512_bf16   the above and -mavx512bf16
//   isa_amx_bf16      the above and -mamx-tile -mamx-bf16
//
// and the preprocessor's __AVX2__, __AVX512F__, ... say here which kernels the rung has.
#include <cstdint>

#include "core/cpu/kernel_table.h"
#include "core/cpu/kernels/dropout_bits.h"
#include "core/cpu/kernels/fma_kernels.h"
#include "core/cpu/kernels/half_conversions.h"
#include "core/cpu/kernels/log_sum_exp_rows.h"
#include "core/cpu/kernels/packed_gemm.h"
#include "core/cpu/kernels/pair_kernels.h"
#include "core/cpu/kernels/philox_lanes.h"
#include "core/cpu/kernels/rung_namespace.h"
#include "core/cpu/kernels/softmax_rows.h"
#include "core/cpu/kernels/tile_kernels.h"
#include "core/cpu/kernels/vector_functions.h"
#include "core/cpu/kernels/widened_format.h"

namespace ember::cpu::EMBER_CPU_KERNELS {
namespace {

// The rung's widest float32 kernel, and the portable one of the same tile shape as its reference.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
using FmaKernel = Avx512FmaKernel;
constexpr bool kVectorGemms = true;
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
using FmaKernel = Avx2FmaKernel;
constexpr bool kVectorGemms = true;
#else
using FmaKernel = PortableFmaKernel<6, 16>;
constexpr bool kVectorGemms = false;
#endif
using ReferenceFmaKernel = PortableFmaKernel<FmaKernel::kRows, FmaKernel::kColumns>;

template <class Format, class Kernel, class Out>
void gemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixOperand<typename Format::In> a,
          MatrixOperand<typename Format::In> b, float beta, Out* c, int64_t ldc) {
  packed::shared_gemm<Format, Kernel>(m, n, k, alpha, a, b, beta, c, ldc);
}

template <class Format, class Kernel>
constexpr GemmKernels<typename Format::In> gemm_kernels() {
  using In = typename Format::In;
  return {&gemm<Format, Kernel, float>, &gemm<Format, Kernel, In>};
}

// bfloat16: on AMX's tiles where the rung has them, in pairs on vdpbf16ps where it has that, else
// widened like float16. The tiles' sums are the hardware's own (core/cpu/kernels/tile_kernels.h):
// their reference is the pairs', held to the same bound rather than to the same bits.
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__) && defined(__AVX512F__)
constexpr GemmKernels<BFloat16> kBf16Gemm = gemm_kernels<TileFormat, AmxTileKernel>();
constexpr GemmKernels<BFloat16> kBf16Reference = gemm_kernels<PairFormat, PortablePairKernel>();
constexpr bool kBf16FlushesSubnormals = true, kBf16BitwiseReference = false;
#elif defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
constexpr GemmKernels<BFloat16> kBf16Gemm = gemm_kernels<PairFormat, Avx512Bf16PairKernel>();
constexpr GemmKernels<BFloat16> kBf16Reference = gemm_kernels<PairFormat, PortablePairKernel>();
constexpr bool kBf16FlushesSubnormals = true, kBf16BitwiseReference = true;
#else
constexpr GemmKernels<BFloat16> kBf16Gemm = gemm_kernels<WidenedFormat<BFloat16>, FmaKernel>();
constexpr GemmKernels<BFloat16> kBf16Reference = gemm_kernels<WidenedFormat<BFloat16>, ReferenceFmaKernel>();
constexpr bool kBf16FlushesSubnormals = false, kBf16BitwiseReference = true;
#endif

template <class T>
constexpr RowKernels<T> rows_of() {
  return {&softmax_row<T>,         &softmax_columns<T>, &log_softmax_gradient<T>,        &log_sum_exp_row<T>,
          &softmax_gradient_row<T>, &sum_exp_shifted<T>, &accumulate_exp_shifted<T>};
}

}  // namespace

const KernelTable& table() {
  static constexpr KernelTable kTable{
      .isa = CpuIsa::EMBER_CPU_ISA_ENUM,
      .philox4x32_counters = &philox4x32_counters,
      .dropout_keep_bits = &dropout_keep_bits,
      .apply_keep_bits = &apply_keep_bits,
      .vector_gemms = kVectorGemms,
      .bf16_gemm = kBf16Gemm,
      .bf16_flushes_subnormals = kBf16FlushesSubnormals,
      .float16_gemm = gemm_kernels<WidenedFormat<Float16>, FmaKernel>(),
      .bf16_gemm_reference = kBf16Reference,
      .bf16_reference_bitwise = kBf16BitwiseReference,
      .float16_gemm_reference = gemm_kernels<WidenedFormat<Float16>, ReferenceFmaKernel>(),
      .map_f32 = &map_vector_function,
      .activation_backward_f32 = &vector_function_backward,
      .rows_f32 = rows_of<float>(),
      .rows_f64 = rows_of<double>(),
      .widen_bf16 = &widen_bf16,
      .widen_f16 = &widen_f16,
      .round_to_bf16 = &round_to_bf16,
      .round_to_f16 = &round_to_f16,
  };
  return kTable;
}

}  // namespace ember::cpu::EMBER_CPU_KERNELS
