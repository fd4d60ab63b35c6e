// The 16-bit element types as CUDA kernels see them: ember's BFloat16 and Float16 (core/half.h)
// are __nv_bfloat16 and __half on the device. Kernels load an element as its compute type
// (float for the 16-bit formats, the type itself otherwise), do their arithmetic there, and
// round once where they store: to_compute() and round_to<T>() below (and round_toward_zero()
// for rand's rule). For float, double, int64 and bool both are the identity, or the
// static_cast of a store, so those kernels compute in their own type.
//
// fmt-free and C++17: read by nvcc (the .cu files) and by the host compiler (the launchers'
// declarations in the *_kernels.h headers name these types). CUDA's conversions are host and
// device functions, so the host side (tests/cuda/half_elements.cpp) checks them against
// core/half.h. The mapping from ember's types is cuda/ops/device_elements.h, host only.
#pragma once

// Under the CPU emulation of tests/cuda_emulation/, which defines both types itself, CUDA's headers
// are not read: that build needs no CUDA toolkit.
#ifndef EMBER_CUDA_EMULATION
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <type_traits>

namespace ember::cuda {

template <class T>
inline constexpr bool is_16_bit_element = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

// What a kernel computes and accumulates in for device elements of type T: float for the 16-bit
// formats, T otherwise (the device side of core's compute_type).
template <class T>
using compute_t = std::conditional_t<is_16_bit_element<T>, float, T>;

// An element widened to its compute type: exact.
template <class T>
__host__ __device__ inline compute_t<T> to_compute(T value) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(value);
  else if constexpr (std::is_same_v<T, __half>) return __half2float(value);
  else return value;
}

// A value stored as a T, what static_cast<T> stores for core's types: to the 16-bit formats
// rounded once to the nearest value, ties to even, from a float (or a 16-bit value, widened) or
// from the double itself (a double, or an integer as a double), never by way of float, where a
// second rounding could land off a tie the double was not on, as core/half.h's constructors
// round; otherwise static_cast, as the float32 kernels always stored.
template <class T, class V>
__host__ __device__ inline T round_to(V value) {
  if constexpr (is_16_bit_element<T>) {
    if constexpr (std::is_same_v<V, float> || is_16_bit_element<V>) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(to_compute(value));
      else return __float2half_rn(to_compute(value));
    } else {
      if constexpr (std::is_same_v<T, __nv_bfloat16>) return __double2bfloat16(static_cast<double>(value));
      else return __double2half(static_cast<double>(value));
    }
  } else if constexpr (std::is_same_v<T, V>) {
    return value;
  } else {
    return static_cast<T>(value);
  }
}

// A float stored as a 16-bit T rounded towards zero: how a uniform [0, 1) draw becomes 16-bit
// (to nearest, the draws within half a step of 1 would become 1, outside the range).
template <class T>
__host__ __device__ inline T round_toward_zero(float value) {
  static_assert(is_16_bit_element<T>, "round_toward_zero is for the 16-bit formats");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rz(value);
  else return __float2half_rz(value);
}

// Applies MACRO to each element type the floating-point kernels are compiled for, to write their
// explicit instantiations once: EMBER_FOR_EACH_FLOATING_ELEMENT(EMBER_INSTANTIATE).
#define EMBER_FOR_EACH_FLOATING_ELEMENT(MACRO) \
  MACRO(float)                                 \
  MACRO(double)                                \
  MACRO(__nv_bfloat16)                         \
  MACRO(__half)

}  // namespace ember::cuda
