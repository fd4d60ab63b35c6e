// Fused attention's forward for bfloat16 and float16 in FlashAttention-2's design, on mma.sync:
// the scores S, the weights P and the output accumulator O never leave registers. float32 runs
// the same kernel on TF32 tensor cores where the user allows TF32 (cuda/attention/mma_fragments.cuh
// holds what differs: the product's k, how fragments are loaded, the rounding to TF32); below,
// "k16" is k8 for it, and P v's operand from the weights is their TF32 rounding.
//
// A block takes `Queries` queries of one matrix with `Warps` warps; warp w owns the queries
// [w R, w R + R), R = Queries / Warps, as R / 16 m16 fragments. The block walks the keys `Keys`
// at a time:
//
//   1. Copies. q (once per matrix), then each key tile's k and v, go from global to shared memory
//      by cp.async, 16 bytes a thread, zero-filled past the lengths and head dims. With two stages
//      the copy of tile t + 1 is issued before the products of tile t, so it runs under them.
//      Tiles are stored swizzled (flash_swizzled_offset): ldmatrix reads them without bank
//      conflicts.
//   2. S = q k^T on tensor cores: q's fragments come from shared memory by ldmatrix once per
//      matrix and stay in registers; k's by ldmatrix per tile (its rows are S's columns, so no
//      transpose). S is left in the accumulator layout of mma.m16n8k16: lane l holds rows
//      g = l / 4 and g + 8 of each fragment, columns 2 (l % 4) and 2 (l % 4) + 1 of each 8 keys.
//   3. The online softmax, in base 2: the scale times log2(e) is folded into one multiply, so
//      each weight is a single exp2. Each lane reduces its own columns of its two rows, then the
//      four lanes of a row (l % 4 = 0..3) combine by two shuffles. The accumulator's rows are
//      rescaled by exp2(m_old - m_new); the running sum stays per lane until the end.
//   4. O += P v on tensor cores. P's accumulator layout is, two n8 fragments at a time, the A
//      operand layout of the next mma: the weights go from float to 16 bits in registers and
//      straight into the product (the one rounding this path adds). v's fragments come by
//      ldmatrix.trans: P v contracts over v's rows.
//
// Masks and dropout are evaluated where the scores are, in registers, by the functions every
// path shares (cuda/attention/attention_scores.cuh): a causal, bool or additive mask, and the
// dropout op's Philox counters. Tiles needing none of that (no mask, inside both lengths) skip
// it. A causal block stops at its last query's key. A row that sees no key keeps max -inf, its
// exps are taken against 0, its sum ends 0: out 0 and log-sum-exp +inf, as every other path.
//
// Layout and pipeline are checked on the CPU, instruction by instruction, by the emulation of
// tests/cuda_emulation/, which compiles this very file.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/attention/attention_scores.cuh"
#include "cuda/attention/flash_attention_plan.h"
#include "cuda/attention/mma_fragments.cuh"
#include "cuda/common/tensor_core_ops.cuh"

// The device code exists where mma.sync and cp.async do (compute capability 8.0), and under the
// CPU emulation.
#if defined(EMBER_CUDA_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define EMBER_FLASH_DEVICE_CODE 1
#else
#define EMBER_FLASH_DEVICE_CODE 0
#endif

namespace ember::cuda {

inline constexpr float kLog2E = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// Rows [row0, row0 + Rows) and columns [0, D) of matrix n of `operand` into a swizzled tile, by
// cp.async: one 16-byte chunk (8 elements of 16 bits, 4 of float32) per copy, zeros past `rows`
// and `cols` (cols is a multiple of 8, so a chunk is wholly inside or wholly outside). Not waited
// for.
template <int D, int Rows, int Threads, class T>
__device__ __forceinline__ void copy_tile_async(T* tile, const T* data, const AttentionLayout& layout, int operand,
                                                int64_t n, int64_t row0, int64_t rows, int64_t cols) {
  constexpr int kChunk = MmaFragments<T>::kChunk;
  constexpr int kChunks = D / kChunk;
  const T* matrix = data + layout.matrix_offset(operand, n);
  const int64_t row_stride = layout.row_stride[operand];
  for (int item = threadIdx.x; item < Rows * kChunks; item += Threads) {
    const int r = item / kChunks, col = (item % kChunks) * kChunk;
    const int64_t row = row0 + r;
    const bool inside = row < rows && col < cols;
    // Outside, nothing is read (0 source bytes): the matrix's start stands in as the address.
    const T* source = inside ? matrix + row * row_stride + col : matrix;
    cp_async_16(tile + MmaFragments<T>::swizzled(r, col, D), source, inside ? 16 : 0);
  }
}

// Every accumulator of an array of m16n8 fragments set to 0 (the loops unroll: they stay registers).
template <int M, int N>
__device__ __forceinline__ void zero_fill(float (&fragments)[M][N][4]) {
  #pragma unroll
  for (int m = 0; m < M; ++m) {
    #pragma unroll
    for (int n = 0; n < N; ++n) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) fragments[m][n][e] = 0.0f;
    }
  }
}

// The k/v pipeline of the kernels that walk the keys tile by tile (the forward, the dQ pass): before
// the products of tile `tile` of matrix n, issues the copy of the next tile into the other stage
// (two stages) or of this one (one stage, past the first, which the caller copies with q), and
// waits for this tile's. The caller's barrier then makes the copies visible to every thread.
template <int D, int Keys, int Threads, int Stages, class T>
__device__ __forceinline__ void await_key_tile(T* k_tiles, T* v_tiles, const AttentionLayout& layout,
                                               const AttentionPointers<T>& args, int64_t n, int tile, int tiles) {
  const int64_t S = layout.source_length;
  if (Stages == 1 && tile > 0) {
    const int64_t key0 = int64_t(tile) * Keys;
    copy_tile_async<D, Keys, Threads>(k_tiles, args.k, layout, kAttentionK, n, key0, S, layout.embed);
    copy_tile_async<D, Keys, Threads>(v_tiles, args.v, layout, kAttentionV, n, key0, S, layout.value_embed);
    cp_async_commit();
  }
  if (Stages == 2 && tile + 1 < tiles) {
    // The next tile into the other stage (read by the previous tile: free since its barrier).
    const int next = (tile + 1) % 2;
    const int64_t next_key0 = int64_t(tile + 1) * Keys;
    copy_tile_async<D, Keys, Threads>(k_tiles + next * Keys * D, args.k, layout, kAttentionK, n, next_key0, S,
                                      layout.embed);
    copy_tile_async<D, Keys, Threads>(v_tiles + next * Keys * D, args.v, layout, kAttentionV, n, next_key0, S,
                                      layout.value_embed);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the copy just issued
  } else {
    cp_async_wait<0>();
  }
}

template <class T, int D, int Queries, int Keys, int Warps, int Stages>
__global__ void __launch_bounds__(32 * Warps)
    flash_attention_forward(AttentionLayout layout, AttentionPointers<T> args) {
#if EMBER_FLASH_DEVICE_CODE
  constexpr FlashTile kTile{Queries, Keys, Warps, Stages};
  static_assert(flash_tile_is_valid(kTile), "a tile of whole fragments");
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  using F = MmaFragments<T>;
  constexpr int kThreads = 32 * Warps;
  constexpr int kWarpRows = Queries / Warps;
  constexpr int kM = kWarpRows / 16;       // m16 fragments of queries per warp
  constexpr int kN = Keys / 8;             // n8 fragments of scores
  constexpr int kDepth = D / F::kDepth;    // k steps of q k^T
  constexpr int kOut = D / 8;              // n8 fragments of the output
  constexpr int kSteps = Keys / F::kDepth;  // k steps of P v
  constexpr FlashForwardPlan plan = flash_forward_plan(D, kTile, sizeof(T));

  unsigned char* const shared = dynamic_shared_memory();
  T* const q_tile = reinterpret_cast<T*>(shared + plan.q);
  T* const k_tiles = reinterpret_cast<T*>(shared + plan.k);
  T* const v_tiles = reinterpret_cast<T*>(shared + plan.v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, pair = 2 * (lane % 4);  // a lane's row in a fragment, its first column
  const int64_t L = layout.target_length, S = layout.source_length;
  const int64_t row0 = int64_t(blockIdx.x) * Queries;
  const int warp_row = warp * kWarpRows;  // the warp's first query, in the tile
  const WeightsDropout<T> dropout(args);
  const float scale_log2 = float(args.scale) * kLog2E;
  const bool no_mask = !args.is_causal && args.allowed == nullptr && args.added == nullptr;
  // A causal query i sees keys j <= i: this block's queries see none past row0 + Queries - 1.
  const int64_t key_end = args.is_causal && row0 + Queries < S ? row0 + Queries : S;
  const int tiles = static_cast<int>((key_end + Keys - 1) / Keys);

  for (int64_t n = blockIdx.y; n < layout.matrices; n += gridDim.y) {
    copy_tile_async<D, Queries, kThreads>(q_tile, args.q, layout, kAttentionQ, n, row0, L, layout.embed);
    copy_tile_async<D, Keys, kThreads>(k_tiles, args.k, layout, kAttentionK, n, 0, S, layout.embed);
    copy_tile_async<D, Keys, kThreads>(v_tiles, args.v, layout, kAttentionV, n, 0, S, layout.value_embed);
    cp_async_commit();

    float acc[kM][kOut][4];
    float row_max[kM][2], row_sum[kM][2];  // per fragment: rows group and group + 8
    uint32_t q_fragments[kM][kDepth][4];
    zero_fill(acc);
    #pragma unroll
    for (int m = 0; m < kM; ++m) {
      row_max[m][0] = row_max[m][1] = minus_infinity<float>();
      row_sum[m][0] = row_sum[m][1] = 0.0f;
    }

    for (int tile = 0; tile < tiles; ++tile) {
      const int64_t key0 = int64_t(tile) * Keys;
      await_key_tile<D, Keys, kThreads, Stages>(k_tiles, v_tiles, layout, args, n, tile, tiles);
      __syncthreads();  // every thread's copies of this tile (and of q) are visible to all
      const T* const k_tile = k_tiles + (tile % Stages) * Keys * D;
      const T* const v_tile = v_tiles + (tile % Stages) * Keys * D;

      if (tile == 0) {
        // q's A fragments, once per matrix.
        #pragma unroll
        for (int m = 0; m < kM; ++m) {
          #pragma unroll
          for (int d = 0; d < kDepth; ++d) {
            F::a_from_columns(q_fragments[m][d], q_tile, warp_row + 16 * m, F::kDepth * d, D);
          }
        }
      }

      // S = q k^T. k's B fragments: the 8 keys of fragment j are B's 8 columns, each a row of
      // k; one load gives two k steps.
      float scores[kM][kN][4];
      zero_fill(scores);
      #pragma unroll
      for (int j = 0; j < kN; ++j) {
        #pragma unroll
        for (int d = 0; d < kDepth; d += 2) {
          uint32_t first[2], second[2];
          F::b_pair_from_columns(first, second, k_tile, 8 * j, F::kDepth * d, D);
          #pragma unroll
          for (int m = 0; m < kM; ++m) {
            F::mma(scores[m][j], q_fragments[m][d], first);
            F::mma(scores[m][j], q_fragments[m][d + 1], second);
          }
        }
      }

      // Scores in base 2, masked where a mask or a length says so. A causal tile wholly at or below
      // the diagonal (its last key no later than the block's first query) needs no mask.
      const bool inside = key0 + Keys <= S && row0 + Queries <= L;
      const bool below_diagonal = args.is_causal && key0 + Keys - 1 <= row0;
      const bool plain_tile =
          inside && (no_mask || (below_diagonal && args.allowed == nullptr && args.added == nullptr));
      #pragma unroll
      for (int m = 0; m < kM; ++m) {
        #pragma unroll
        for (int j = 0; j < kN; ++j) {
          #pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (plain_tile) {
              scores[m][j][e] *= scale_log2;
            } else {
              const int64_t i = row0 + warp_row + 16 * m + group + 8 * (e / 2);
              const int64_t key = key0 + 8 * j + pair + e % 2;
              scores[m][j][e] = masked_score(layout, args, n, i, key, scores[m][j][e]) * kLog2E;
            }
          }
        }
      }

// The online softmax, row by row: e = 0, 1 are row `group`, e = 2, 3 row `group + 8`.
      #pragma unroll
      for (int m = 0; m < kM; ++m) {
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
          float tile_max = minus_infinity<float>();
          #pragma unroll
          for (int j = 0; j < kN; ++j) {
            tile_max = fmaxf(tile_max, fmaxf(scores[m][j][2 * half], scores[m][j][2 * half + 1]));
          }
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
          const float new_max = fmaxf(row_max[m][half], tile_max);
          // No key seen yet: max -inf; exponentiate against 0, so exp2(-inf) = 0, not NaN.
          const float base = new_max == minus_infinity<float>() ? 0.0f : new_max;
          const float rescale = exp2f(row_max[m][half] - base);
          row_max[m][half] = new_max;
          float tile_sum = 0.0f;
          #pragma unroll
          for (int j = 0; j < kN; ++j) {
            #pragma unroll
            for (int e = 2 * half; e < 2 * half + 2; ++e) {
              const float weight = exp2f(scores[m][j][e] - base);
              tile_sum += weight;
              scores[m][j][e] = weight;
            }
          }
          row_sum[m][half] = row_sum[m][half] * rescale + tile_sum;
          #pragma unroll
          for (int o = 0; o < kOut; ++o) {
            acc[m][o][2 * half] *= rescale;
            acc[m][o][2 * half + 1] *= rescale;
          }
        }
      }

      // Dropout scales the weights P v multiplies, not the sum that normalises them.
      if (dropout.on) {
        #pragma unroll
        for (int m = 0; m < kM; ++m) {
          #pragma unroll
          for (int j = 0; j < kN; ++j) {
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int64_t i = row0 + warp_row + 16 * m + group + 8 * (e / 2);
              const int64_t key = key0 + 8 * j + pair + e % 2;
              if (i < L && key < S) scores[m][j][e] *= dropout.factor(layout, n, i, key);
            }
          }
        }
      }

// O += P v. P's A fragment for the keys of step s comes from the score fragments in registers;
// v's B fragments from its rows (the keys), two output fragments (16 columns) a load.
      #pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        uint32_t p_fragments[kM][4];
        #pragma unroll
        for (int m = 0; m < kM; ++m) F::a_from_accumulators(p_fragments[m], scores[m], s);
        #pragma unroll
        for (int o = 0; o < kOut; o += 2) {
          uint32_t first[2], second[2];
          F::b_pair_from_rows(first, second, v_tile, F::kDepth * s, 8 * o, D);
          #pragma unroll
          for (int m = 0; m < kM; ++m) {
            F::mma(acc[m][o], p_fragments[m], first);
            F::mma(acc[m][o + 1], p_fragments[m], second);
          }
        }
      }
      __syncthreads();  // every warp is done with this stage (and q) before a copy replaces it
    }
    cp_async_wait<0>();  // nothing stays in flight (something does only when no tile ran)

// out = O / l, rounded once; lse = m ln 2 + log l. The four lanes of a row hold parts of l.
    #pragma unroll
    for (int m = 0; m < kM; ++m) {
      #pragma unroll
      for (int half = 0; half < 2; ++half) {
        float sum = row_sum[m][half];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const int64_t i = row0 + warp_row + 16 * m + group + 8 * half;
        if (i >= L) continue;
        // A row that saw no key attends to nothing: out 0, and lse +inf so that the backward's
        // exp(S - lse) gives it zero weights and zero gradients, as on the CPU.
        const bool attended = sum > 0.0f;
        const float inverse = attended ? 1.0f / sum : 0.0f;
        #pragma unroll
        for (int o = 0; o < kOut; ++o) {
          #pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int64_t c = 8 * o + pair + e;
            if (c < layout.value_embed) {
              args.out[layout.offset(kAttentionOut, n, i, c)] = round_to<T>(acc[m][o][2 * half + e] * inverse);
            }
          }
        }
        if (lane % 4 == 0) {
          args.log_sum_exp[n * L + i] = attended ? row_max[m][half] * kLn2 + logf(sum) : -minus_infinity<float>();
        }
      }
    }
  }
#endif
}

}  // namespace ember::cuda
