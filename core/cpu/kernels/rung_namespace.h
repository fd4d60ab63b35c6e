// The namespace of one rung's kernels (core/cpu/isa.h). core/cpu/kernels/rung.cpp is compiled once
// per rung, each time with that rung's compiler flags and EMBER_CPU_KERNELS naming its namespace
// (ember::cpu::isa_avx2, ...). Every function and template the kernel headers define lives in
// that namespace, so each compilation's copies have names of their own: were two copies of one
// inline function to share a name, the linker would keep one of them for every caller, and a
// baseline CPU could end up running the AVX2 copy.
//
// For the same reason the kernels keep to the compiler's builtins (std::fma, std::fabs) and to
// one-line inline functions of ember's that are always inlined (half.h's conversions); the small
// helpers below stand in for std::min and std::fill, which a build without optimisation would
// leave out of line. The test cpu_kernel_symbols reads each rung's compiled object and fails on
// any definition it shares with the others.
#pragma once

#include <cstdint>

#if !defined(EMBER_CPU_KERNELS)
#error "core/cpu/kernels/ headers are compiled only into core/cpu/kernels/rung.cpp, once per instruction set"
#endif

namespace ember::cpu::EMBER_CPU_KERNELS {

template <class T>
constexpr T smaller(T a, T b) {
  return b < a ? b : a;
}

template <class T>
constexpr T larger(T a, T b) {
  return a < b ? b : a;
}

template <class T>
void fill(T* begin, int64_t count, T value) {
  for (int64_t i = 0; i < count; ++i) begin[i] = value;
}

}  // namespace ember::cpu::EMBER_CPU_KERNELS
