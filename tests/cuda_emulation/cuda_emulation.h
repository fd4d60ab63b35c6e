// A CPU emulation of the parts of CUDA that ember's tensor-core attention kernels use, so that
// their device code (cuda/attention/flash_attention_forward.cuh) compiles as plain C++ and runs in
// the ordinary test suite on any machine, with no GPU and no CUDA toolkit.
//
// Include this header before any kernel header, in a translation unit of its own: it defines
// CUDA's keywords and built-ins (__device__, threadIdx, __syncthreads, ...) as macros and
// functions, which no other code should see.
//
// What it models, and nothing more:
// - A block's threads, each a fiber of its own, run one at a time. The scheduler switches fibers
//   at every barrier and warp-wide instruction and, at random (seeded), at other memory
//   operations, so each seed runs another interleaving of the same kernel.
// - __syncthreads (every thread of the block must reach it; one that returned while others wait
//   is an error), __syncwarp and __shfl_xor_sync (all 32 lanes, the same instruction).
// - mma.sync.m16n8k16 (bf16 and f16, float accumulators), mma.sync.m16n8k8 with TF32 operands,
//   and ldmatrix (.x1, .x2, .x4, and .trans) exactly by the fragment layouts of the PTX ISA: which
//   lane holds which element. The products are exact and summed in double, then rounded to float
//   once. A TF32 operand not rounded to TF32 (lower 13 bits set) is an error.
// - cp.async of 16 bytes with zero fill: the data lands only at the issuing thread's
//   cp.async.wait_group; until then the destination reads as an error (poisoned).
// - Shared memory: every access in bounds and aligned as the instruction needs; no two threads
//   write the same byte, nor does one read what another wrote or write what another read,
//   within one barrier interval (between two __syncthreads). Bytes never written read as an
//   error too.
// - Global reads of cp.async checked against the regions a test registers.
//
// What it cannot show: speed, bank conflicts, register pressure, memory ordering between blocks,
// or anything of the hardware's accumulation order inside an mma (real tensor cores round
// differently in the last bits). It catches layout, index, tail, mask, online-softmax and
// accumulation mistakes. Any violation stops the launch with std::runtime_error naming it.
#pragma once

#define EMBER_CUDA_EMULATION 1

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

#include "core/half.h"

// CUDA's function and variable qualifiers mean nothing on the CPU.
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The 16-bit formats, stored as CUDA stores them (2 bytes, the same bits as ember's BFloat16 and
// Float16), converted with ember's own rounding (to nearest, ties to even).
struct __nv_bfloat16 {
  uint16_t bits = 0;
};
struct __half {
  uint16_t bits = 0;
};
inline float __bfloat162float(__nv_bfloat16 value) { return float(ember::BFloat16::from_bits(value.bits)); }
inline float __half2float(__half value) { return float(ember::Float16::from_bits(value.bits)); }
inline __nv_bfloat16 __float2bfloat16_rn(float value) { return {ember::BFloat16(value).bits}; }
inline __half __float2half_rn(float value) { return {ember::Float16(value).bits}; }
inline __nv_bfloat16 __double2bfloat16(double value) { return {ember::BFloat16(value).bits}; }
inline __half __double2half(double value) { return {ember::Float16(value).bits}; }
// Toward zero: the nearest value unless it lies farther from zero, then one step back.
inline __nv_bfloat16 __float2bfloat16_rz(float value) {
  const ember::BFloat16 nearest(value);
  if (!std::isfinite(value) || std::fabs(float(nearest)) <= std::fabs(value)) return {nearest.bits};
  return {static_cast<uint16_t>(nearest.bits - 1)};
}
inline __half __float2half_rz(float value) {
  const ember::Float16 nearest(value);
  if (!std::isfinite(value) || std::fabs(float(nearest)) <= std::fabs(value)) return {nearest.bits};
  return {static_cast<uint16_t>(nearest.bits - 1)};
}

namespace ember::cuda_emulation {

// The calling fiber's coordinates, as CUDA's built-in variables give them.
dim3 thread_index();
dim3 block_index();
dim3 block_dim();
dim3 grid_dim();

void sync_threads();
void sync_warp(unsigned int mask);
float shuffle_xor(unsigned int mask, float value, int lane_mask);

// The start of the block's dynamic shared memory (as `extern __shared__` declares it).
unsigned char* dynamic_shared_memory();

// A global buffer cp.async may read from; reads outside every registered region are errors once
// any region is registered (until clear_global_regions).
void register_global_region(const void* begin, size_t bytes);
void clear_global_regions();

// Runs `thread_body` once for each thread of each block of the grid, with `shared_bytes` of
// dynamic shared memory per block. Blocks run one after another; a block's threads interleave
// as `interleaving_seed` chooses. Throws std::runtime_error on any violation listed above.
void launch(dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& thread_body,
            uint64_t interleaving_seed = 0);

// How many instructions of each kind the last launch ran (for tests that check a kernel used
// the paths they meant it to).
struct LaunchCounts {
  int64_t barriers = 0, mma = 0, ldmatrix = 0, cp_async = 0, shuffles = 0;
};
LaunchCounts last_launch_counts();

// Fibers run one at a time, so an addition to global memory is atomic as it stands; the switch
// after it lets other threads' additions interleave.
float atomic_add(float* address, float value);

}  // namespace ember::cuda_emulation

#define threadIdx (::ember::cuda_emulation::thread_index())
#define blockIdx (::ember::cuda_emulation::block_index())
#define blockDim (::ember::cuda_emulation::block_dim())
#define gridDim (::ember::cuda_emulation::grid_dim())

inline void __syncthreads() { ::ember::cuda_emulation::sync_threads(); }
inline void __syncwarp(unsigned int mask = 0xffffffffu) { ::ember::cuda_emulation::sync_warp(mask); }
inline float __shfl_xor_sync(unsigned int mask, float value, int lane_mask) {
  return ::ember::cuda_emulation::shuffle_xor(mask, value, lane_mask);
}

inline float atomicAdd(float* address, float value) { return ::ember::cuda_emulation::atomic_add(address, value); }

// The tensor-core instructions, under the names cuda/common/tensor_core_ops.cuh gives their
// inline-PTX versions, so the kernels call the same functions on either side.
namespace ember::cuda {

void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]);
void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]);
void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]);
// cvt.rna.tf32.f32: a float rounded to TF32's 10 fraction bits, to nearest with ties away from
// zero, as a float with its lower 13 bits 0 (infinities and NaN kept).
inline uint32_t round_to_tf32(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u) return bits;
  return (bits + 0x1000u) & 0xFFFFE000u;
}
// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: `row` is this lane's row address
// (lanes 8m to 8m + 7 give the rows of matrix m; lanes past the count give none that is read).
void ldmatrix_x1(uint32_t (&r)[1], const void* row, bool transposed = false);
void ldmatrix_x2(uint32_t (&r)[2], const void* row, bool transposed = false);
void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool transposed = false);
// cp.async.cg.shared.global of 16 bytes: the first `source_bytes` (0 to 16) from `global`, the
// rest zeros.
void cp_async_16(void* shared, const void* global, int source_bytes);
void cp_async_commit();
// cp.async.wait_group: the data of all but the newest `pending` committed groups has landed.
void cp_async_wait_pending(int pending);
template <int Pending>
inline void cp_async_wait() {
  cp_async_wait_pending(Pending);
}
// A thread's own 4-byte store to shared memory, checked as cp.async's are (and visible at once),
// and its 4-byte load, checked as ldmatrix's reads are.
void store_shared_32(void* shared, uint32_t value);
uint32_t load_shared_32(const void* shared);
inline unsigned char* dynamic_shared_memory() { return ::ember::cuda_emulation::dynamic_shared_memory(); }

}  // namespace ember::cuda
