// The tensor-core instructions the attention kernels are written with, each a small function over
// inline PTX: mma.sync.m16n8k16 (bf16 or f16 operands, float32 accumulators), mma.sync.m16n8k8
// with TF32 operands (float32 rounded to 10 fraction bits, cvt.rna.tf32.f32), ldmatrix (8 x 8
// tiles of 16-bit elements from shared memory into the lanes' registers, transposed or not; read
// as 8 x 4 tiles of 32-bit elements when not transposed) and cp.async (16 bytes from global to
// shared memory, landing at a later wait_group).
//
// Why PTX and not WMMA: mma.sync's register layout is documented (the PTX ISA's "Matrix
// Fragments for mma.m16n8k16" tables), so a kernel knows which lane holds which score and can
// run the softmax where the product left it, in registers; WMMA's fragments are opaque and force
// a round trip through shared memory on every tile.
//
// Under the CPU emulation (tests/cuda_emulation/, EMBER_CUDA_EMULATION) the same functions are
// defined by the emulation, by the same tables, so a kernel's device code runs unchanged on the
// CPU. Needs compute capability 8.0 for the bf16 products and cp.async.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/common/half_elements.h"

namespace ember::cuda {

#ifndef EMBER_CUDA_EMULATION

// The 32-bit shared-space address PTX's shared-memory operands take.
__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// d = a b + c: a 16 x 16 (row), b 16 x 8 (col), c and d 16 x 8 float.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// d = a b + c: a 16 x 8 (row), b 8 x 8 (col), TF32 operands (one a register), c and d 16 x 8 float.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// A float rounded to TF32 (to nearest, ties away from zero), as the float bits mma takes.
__device__ __forceinline__ uint32_t round_to_tf32(float value) {
  uint32_t bits = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(bits) : "f"(value));
#endif
  return bits;
}

// Lanes 8m to 8m + 7 give the row addresses (16 bytes each, 16-byte aligned) of matrix m.
__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], const void* row, bool transposed = false) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (transposed) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0])
                 : "r"(shared_address(row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(shared_address(row)));
  }
#endif
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* row, bool transposed = false) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (transposed) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(shared_address(row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(shared_address(row)));
  }
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool transposed = false) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (transposed) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row)));
  }
#endif
}

// 16 bytes to shared memory: the first `source_bytes` (0 to 16) from `global`, zeros after them
// (0 reads nothing: a tile's rows past the matrix become zeros without a branch around the copy).
// Bypasses L1 (.cg): the tiles are read once per block.
__device__ __forceinline__ void cp_async_16(void* shared, const void* global, int source_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared)), "l"(global),
               "r"(source_bytes)
               : "memory");
#endif
}

// Closes the group of this thread's cp.async issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `Pending` of this thread's committed groups are still in flight. Other
// threads' copies are visible only after a __syncthreads that follows their wait.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

// A 4-byte store to shared memory (a kernel's own, not a copy): a function so that the CPU
// emulation can check it as it checks cp.async.
__device__ __forceinline__ void store_shared_32(void* shared, uint32_t value) {
  *static_cast<uint32_t*>(shared) = value;
}

// A 4-byte load from shared memory (a function, checked by the CPU emulation as ldmatrix is).
__device__ __forceinline__ uint32_t load_shared_32(const void* shared) {
  return *static_cast<const uint32_t*>(shared);
}

// The block's dynamic shared memory, 128-byte aligned.
__device__ __forceinline__ unsigned char* dynamic_shared_memory() {
  extern __shared__ __align__(128) unsigned char ember_dynamic_shared[];
  return ember_dynamic_shared;
}

#endif  // EMBER_CUDA_EMULATION

// d = a b + c for 16-bit T (bf16 or f16 products).
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                             const float (&c)[4]) {
  static_assert(is_16_bit_element<T>, "mma.sync.m16n8k16 multiplies bf16 or f16");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    mma_m16n8k16_bf16(d, a, b, c);
  } else {
    mma_m16n8k16_f16(d, a, b, c);
  }
}

// The float whose bits a 32-bit register holds (an ldmatrix of float elements gives bits).
__device__ __forceinline__ float bits_as_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, 4);
  return value;
}

// Two floats rounded to T (to nearest, ties to even) in one register, `low` in the lower half:
// the order of a fragment's pair of elements.
template <class T>
__device__ __forceinline__ uint32_t pack_pair(float low, float high) {
  static_assert(is_16_bit_element<T>, "a register holds two 16-bit elements");
  const T first = round_to<T>(low), second = round_to<T>(high);
  uint16_t first_bits = 0, second_bits = 0;
  memcpy(&first_bits, &first, 2);
  memcpy(&second_bits, &second, 2);
  return uint32_t(first_bits) | (uint32_t(second_bits) << 16);
}

}  // namespace ember::cuda
