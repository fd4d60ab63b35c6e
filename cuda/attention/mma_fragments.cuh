// How the mma.sync attention kernels (flash_attention_forward.cuh, flash_attention_backward.cuh,
// flash_attention_grad_q.cuh) move operands of element type T between swizzled shared-memory
// tiles, registers and the tensor cores. The kernels are written once against MmaFragments<T>;
// what differs between the element types is here:
//
//   bfloat16, float16: mma.sync.m16n8k16, two elements a register. Every fragment comes by
//     ldmatrix, transposed (.trans) where the tile's rows are the product's k.
//   float32 on TF32:   mma.sync.m16n8k8, one element a register, every operand rounded to TF32
//     (cvt.rna) before the product. ldmatrix without .trans reads 32-bit elements as the TF32
//     fragments want them; .trans moves 16-bit halves, so where the tile's rows are k the lanes
//     load their elements one by one.
//
// Which k is which. A product sums over k, so the order in which a fragment's registers visit k
// is free as long as A and B agree. The 16-bit types keep k in order. For TF32, an accumulator
// (m16n8, lane l holding columns 2t and 2t + 1, t = l % 4) becomes an A fragment (k columns t and
// t + 4) without moving data between lanes when A's slot t stands for column 2t and slot t + 4 for
// 2t + 1; so every operand that meets such an A, every B "from rows" and the A "from rows" of dQ,
// is loaded in that same order. Products of two ldmatrix operands (q k^T, dO v^T) keep k in order.
//
// Names: an operand is "from columns" where the tile's rows are the product's m (A) or n (B),
// k running along the row; "from rows" where the tile's rows are k.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/attention/flash_attention_plan.h"
#include "cuda/common/tensor_core_ops.cuh"

namespace ember::cuda {

template <class T, class = void>
struct MmaFragments;

// bfloat16 and float16: m16n8k16.
template <class T>
struct MmaFragments<T, std::enable_if_t<is_16_bit_element<T>>> {
  static constexpr int kDepth = 16;  // k of one product
  static constexpr int kChunk = 8;   // elements in a 16-byte copy and swizzle chunk
  // Accumulator fragments (n8) that make one A fragment of k = kDepth.
  static constexpr int kAccumulatorsPerStep = 2;

  __device__ __forceinline__ static int swizzled(int row, int col, int width) {
    return flash_swizzled_offset(row, col, width, kChunk);
  }

  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_m16n8k16<T>(d, a, b, d);
  }

  // A (16 x kDepth) from rows [row, row + 16), columns [col, col + kDepth) of a tile `width` wide:
  // ldmatrix matrices (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15),
  // (rows 8-15, cols 8-15), lanes 8m .. 8m + 7 giving matrix m's rows.
  __device__ __forceinline__ static void a_from_columns(uint32_t (&a)[4], const T* tile, int row, int col,
                                                        int width) {
    const int lane = threadIdx.x % 32;
    ldmatrix_x4(a, tile + swizzled(row + (lane % 8) + ((lane / 8) % 2) * 8, col + (lane / 16) * 8, width));
  }

  // B of two k steps: the 8 tile rows [row, row + 8) are B's columns (n), columns [col, col + 32)
  // its k: `first` for k [col, col + 16), `second` for the next 16. One ldmatrix.x4.
  __device__ __forceinline__ static void b_pair_from_columns(uint32_t (&first)[2], uint32_t (&second)[2],
                                                             const T* tile, int row, int col, int width) {
    const int lane = threadIdx.x % 32;
    uint32_t r[4];
    ldmatrix_x4(r, tile + swizzled(row + lane % 8, col + (lane / 8) * 8, width));
    first[0] = r[0];
    first[1] = r[1];
    second[0] = r[2];
    second[1] = r[3];
  }

  // B of one k step from the tile rows [row, row + kDepth) (k), for two n8 fragments: columns
  // [col, col + 8) into `first`, [col + 8, col + 16) into `second`. ldmatrix.x4.trans.
  __device__ __forceinline__ static void b_pair_from_rows(uint32_t (&first)[2], uint32_t (&second)[2],
                                                          const T* tile, int row, int col, int width) {
    const int lane = threadIdx.x % 32;
    uint32_t r[4];
    ldmatrix_x4(r, tile + swizzled(row + (lane % 8) + ((lane / 8) % 2) * 8, col + (lane / 16) * 8, width), true);
    first[0] = r[0];
    first[1] = r[1];
    second[0] = r[2];
    second[1] = r[3];
  }

  // A (16 x kDepth) whose k are the tile rows [row, row + kDepth) and m the columns [col, col + 16):
  // the tile's 16 x 16 block read transposed, matrix m of the x4 stored rows 8 (m / 2) on, columns
  // 8 (m % 2) on.
  __device__ __forceinline__ static void a_from_rows(uint32_t (&a)[4], const T* tile, int row, int col, int width) {
    const int lane = threadIdx.x % 32;
    ldmatrix_x4(a, tile + swizzled(row + (lane % 8) + (lane / 16) * 8, col + ((lane / 8) % 2) * 8, width), true);
  }

  // The A fragment of k step `step` made of accumulator fragments 2 step and 2 step + 1 (m16 x n8
  // each), rounded to T: the accumulator layout, two n8 fragments side by side, is the A layout.
  template <int N>
  __device__ __forceinline__ static void a_from_accumulators(uint32_t (&a)[4], const float (&fragments)[N][4],
                                                             int step) {
    const float(&low)[4] = fragments[2 * step];
    const float(&high)[4] = fragments[2 * step + 1];
    a[0] = pack_pair<T>(low[0], low[1]);
    a[1] = pack_pair<T>(low[2], low[3]);
    a[2] = pack_pair<T>(high[0], high[1]);
    a[3] = pack_pair<T>(high[2], high[3]);
  }

  // An A fragment of a_from_accumulators stored where its elements belong in a tile: rows
  // [row, row + 16), columns [col, col + kDepth).
  __device__ __forceinline__ static void store_a(T* tile, const uint32_t (&a)[4], int row, int col, int width) {
    const int lane = threadIdx.x % 32;
    const int group = lane / 4, pair = 2 * (lane % 4);
    store_shared_32(tile + swizzled(row + group, col + pair, width), a[0]);
    store_shared_32(tile + swizzled(row + group + 8, col + pair, width), a[1]);
    store_shared_32(tile + swizzled(row + group, col + 8 + pair, width), a[2]);
    store_shared_32(tile + swizzled(row + group + 8, col + 8 + pair, width), a[3]);
  }
};

// float32 on TF32: m16n8k8.
template <>
struct MmaFragments<float> {
  static constexpr int kDepth = 8;
  static constexpr int kChunk = 4;
  static constexpr int kAccumulatorsPerStep = 1;

  __device__ __forceinline__ static int swizzled(int row, int col, int width) {
    return flash_swizzled_offset(row, col, width, kChunk);
  }

  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_m16n8k8_tf32(d, a, b, d);
  }

  template <int N>
  __device__ __forceinline__ static void round_all(uint32_t (&registers)[N]) {
    #pragma unroll
    for (int r = 0; r < N; ++r) registers[r] = round_to_tf32(bits_as_float(registers[r]));
  }

  // One element of a tile, rounded to TF32.
  __device__ __forceinline__ static uint32_t element(const float* tile, int row, int col, int width) {
    return round_to_tf32(bits_as_float(load_shared_32(tile + swizzled(row, col, width))));
  }

  // A (16 x 8): register 0 holds (g, t), 1 (g + 8, t), 2 (g, t + 4), 3 (g + 8, t + 4), g = lane / 4,
  // t = lane % 4; ldmatrix (not transposed) gives lane l word l % 4 of row l / 4 of each 8 x 4
  // matrix: matrices (rows 0-7, cols 0-3), (rows 8-15, cols 0-3), (rows 0-7, cols 4-7), (8-15, 4-7).
  __device__ __forceinline__ static void a_from_columns(uint32_t (&a)[4], const float* tile, int row, int col,
                                                        int width) {
    const int lane = threadIdx.x % 32;
    ldmatrix_x4(a, tile + swizzled(row + (lane % 8) + ((lane / 8) % 2) * 8, col + (lane / 16) * 4, width));
    round_all(a);
  }

  // B (8 x 8, k x n): register 0 holds (t, g), 1 (t + 4, g); the tile's row g is B's column g, so
  // the matrices are cols 0-3, 4-7 (first step), 8-11, 12-15 (second step) of the 8 rows.
  __device__ __forceinline__ static void b_pair_from_columns(uint32_t (&first)[2], uint32_t (&second)[2],
                                                             const float* tile, int row, int col, int width) {
    const int lane = threadIdx.x % 32;
    uint32_t r[4];
    ldmatrix_x4(r, tile + swizzled(row + lane % 8, col + (lane / 8) * 4, width));
    round_all(r);
    first[0] = r[0];
    first[1] = r[1];
    second[0] = r[2];
    second[1] = r[3];
  }

  // B from rows [row, row + 8) (k) in the paired order: slot t is row 2t, slot t + 4 row 2t + 1.
  __device__ __forceinline__ static void b_pair_from_rows(uint32_t (&first)[2], uint32_t (&second)[2],
                                                          const float* tile, int row, int col, int width) {
    const int lane = threadIdx.x % 32;
    const int group = lane / 4, k = row + 2 * (lane % 4);
    first[0] = element(tile, k, col + group, width);
    first[1] = element(tile, k + 1, col + group, width);
    second[0] = element(tile, k, col + 8 + group, width);
    second[1] = element(tile, k + 1, col + 8 + group, width);
  }

  // A (16 x 8) whose k are the tile rows [row, row + 8), in the paired order, and m the columns
  // [col, col + 16).
  __device__ __forceinline__ static void a_from_rows(uint32_t (&a)[4], const float* tile, int row, int col,
                                                     int width) {
    const int lane = threadIdx.x % 32;
    const int group = lane / 4, k = row + 2 * (lane % 4);
    a[0] = element(tile, k, col + group, width);
    a[1] = element(tile, k, col + group + 8, width);
    a[2] = element(tile, k + 1, col + group, width);
    a[3] = element(tile, k + 1, col + group + 8, width);
  }

  // The A fragment of k step `step` from accumulator fragment `step`: the lane's (g, 2t), (g, 2t + 1),
  // (g + 8, 2t), (g + 8, 2t + 1) are slots (g, t), (g, t + 4), (g + 8, t), (g + 8, t + 4) in the
  // paired order.
  template <int N>
  __device__ __forceinline__ static void a_from_accumulators(uint32_t (&a)[4], const float (&fragments)[N][4],
                                                             int step) {
    const float(&f)[4] = fragments[step];
    a[0] = round_to_tf32(f[0]);
    a[1] = round_to_tf32(f[2]);
    a[2] = round_to_tf32(f[1]);
    a[3] = round_to_tf32(f[3]);
  }

  // An A fragment of a_from_accumulators stored where its elements belong: rows [row, row + 16),
  // columns [col, col + 8).
  __device__ __forceinline__ static void store_a(float* tile, const uint32_t (&a)[4], int row, int col, int width) {
    const int lane = threadIdx.x % 32;
    const int group = lane / 4, pair = 2 * (lane % 4);
    store_shared_32(tile + swizzled(row + group, col + pair, width), a[0]);
    store_shared_32(tile + swizzled(row + group + 8, col + pair, width), a[1]);
    store_shared_32(tile + swizzled(row + group, col + pair + 1, width), a[2]);
    store_shared_32(tile + swizzled(row + group + 8, col + pair + 1, width), a[3]);
  }
};

}  // namespace ember::cuda
