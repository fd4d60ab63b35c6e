// dQ of fused attention in a pass of its own, for bfloat16 and float16 on mma.sync: the
// deterministic mode of the backward (EMBER_ATTENTION_DETERMINISTIC, set_attention_deterministic).
//
// Why a pass of its own: the backward (flash_attention_backward.cuh) walks the keys block by block
// and adds each block's share of dQ into a float32 buffer by atomics, so the order of the additions,
// and with it the last bits of dQ, changes from run to run. Here a block owns `Queries` queries of
// one matrix and walks every key tile in order, so each element of dQ is one chain of sums in a
// fixed order, written by one thread; the backward runs with dQ left out. The cost is the scores
// and dP computed a second time (two products more per key tile).
//
// The block's layout is the forward's (flash_attention_forward.cuh): warp w owns the queries
// [w R, w R + R), R = Queries / Warps, as R / 16 m16 fragments; q and dO arrive once per matrix,
// k and v tile by tile through `Stages` cp.async stages. Per key tile:
//
//   1. S = q k^T and dP = dO v^T on tensor cores: q's and dO's rows are A fragments, k's and v's
//      rows B fragments (ldmatrix, no transpose), as the forward's q k^T.
//   2. In registers, dS = P (dP f - D) by the backward's own score_backward
//      (flash_attention_backward.cuh), from the forward's log-sum-exp and D = rowsum(dO o O) of the
//      pre-pass; zero past the lengths and where masked.
//   3. dQ += dS k: dS, rounded to 16 bits in registers (the rounding the backward's dQ has), is the
//      A operand as the forward's P is; k's B fragments by ldmatrix.trans, as the forward's v.
//
// At the end dQ times the scale is added into grad_q's float32 buffer, each element by one thread.
// Causal blocks stop at their last query's key. Checked on the CPU by tests/cuda_emulation/.
#pragma once

#include <cstdint>

#include "cuda/attention/flash_attention_backward.cuh"

namespace ember::cuda {

template <class T, int D, int Queries, int Keys, int Warps, int Stages>
__global__ void __launch_bounds__(32 * Warps)
    flash_attention_grad_q(AttentionLayout layout, AttentionPointers<T> args) {
#if EMBER_FLASH_DEVICE_CODE
  constexpr FlashTile kTile{Queries, Keys, Warps, Stages};
  static_assert(flash_tile_is_valid(kTile), "a tile of whole fragments");
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  using F = MmaFragments<T>;
  constexpr int kThreads = 32 * Warps;
  constexpr int kWarpRows = Queries / Warps;
  constexpr int kM = kWarpRows / 16;        // m16 fragments of queries per warp
  constexpr int kN = Keys / 8;              // n8 fragments of scores
  constexpr int kDepth = D / F::kDepth;     // k steps of q k^T and dO v^T
  constexpr int kOut = D / 8;               // n8 fragments of dQ
  constexpr int kSteps = Keys / F::kDepth;  // k steps of dS k
  constexpr FlashGradQPlan plan = flash_grad_q_plan(D, kTile, sizeof(T));

  unsigned char* const shared = dynamic_shared_memory();
  T* const q_tile = reinterpret_cast<T*>(shared + plan.q);
  T* const grad_out_tile = reinterpret_cast<T*>(shared + plan.grad_out);
  T* const k_tiles = reinterpret_cast<T*>(shared + plan.k);
  T* const v_tiles = reinterpret_cast<T*>(shared + plan.v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, pair = 2 * (lane % 4);
  const int64_t L = layout.target_length, S = layout.source_length;
  const int64_t row0 = int64_t(blockIdx.x) * Queries;
  const int warp_row = warp * kWarpRows;
  const WeightsDropout<T> dropout(args);
  const float scale_log2 = float(args.scale) * kLog2E;
  const bool no_mask = !args.is_causal && args.allowed == nullptr && args.added == nullptr;
  const int64_t key_end = args.is_causal && row0 + Queries < S ? row0 + Queries : S;
  const int tiles = static_cast<int>((key_end + Keys - 1) / Keys);

  for (int64_t n = blockIdx.y; n < layout.matrices; n += gridDim.y) {
    copy_tile_async<D, Queries, kThreads>(q_tile, args.q, layout, kAttentionQ, n, row0, L, layout.embed);
    copy_tile_async<D, Queries, kThreads>(grad_out_tile, args.grad_out, layout, kAttentionGradOut, n, row0, L,
                                          layout.value_embed);
    copy_tile_async<D, Keys, kThreads>(k_tiles, args.k, layout, kAttentionK, n, 0, S, layout.embed);
    copy_tile_async<D, Keys, kThreads>(v_tiles, args.v, layout, kAttentionV, n, 0, S, layout.value_embed);
    cp_async_commit();

    // Each lane's two rows per fragment: the forward's log-sum-exp and the pre-pass's D.
    float row_lse[kM][2], row_d[kM][2];
    float grad_q[kM][kOut][4];
    #pragma unroll
    for (int m = 0; m < kM; ++m) {
      #pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t i = row0 + warp_row + 16 * m + group + 8 * half;
        row_lse[m][half] = i < L ? args.log_sum_exp[n * L + i] * kLog2E : 0.0f;
        row_d[m][half] = i < L ? args.out_dot_grad[n * L + i] : 0.0f;
      }
    }
    zero_fill(grad_q);

    for (int tile = 0; tile < tiles; ++tile) {
      const int64_t key0 = int64_t(tile) * Keys;
      await_key_tile<D, Keys, kThreads, Stages>(k_tiles, v_tiles, layout, args, n, tile, tiles);
      __syncthreads();  // this tile's k and v (and q, dO) are visible to every thread
      const T* const k_tile = k_tiles + (tile % Stages) * Keys * D;
      const T* const v_tile = v_tiles + (tile % Stages) * Keys * D;

      // 1. S = q k^T and dP = dO v^T, two k16 steps of the head dim at a time.
      float scores[kM][kN][4], grad_weights[kM][kN][4];
      zero_fill(scores);
      zero_fill(grad_weights);
      #pragma unroll
      for (int d = 0; d < kDepth; d += 2) {
        uint32_t q_fragments[kM][2][4], g_fragments[kM][2][4];
        #pragma unroll
        for (int m = 0; m < kM; ++m) {
          #pragma unroll
          for (int h = 0; h < 2; ++h) {
            F::a_from_columns(q_fragments[m][h], q_tile, warp_row + 16 * m, F::kDepth * (d + h), D);
            F::a_from_columns(g_fragments[m][h], grad_out_tile, warp_row + 16 * m, F::kDepth * (d + h), D);
          }
        }
        #pragma unroll
        for (int j = 0; j < kN; ++j) {
          uint32_t k_first[2], k_second[2], v_first[2], v_second[2];
          F::b_pair_from_columns(k_first, k_second, k_tile, 8 * j, F::kDepth * d, D);
          F::b_pair_from_columns(v_first, v_second, v_tile, 8 * j, F::kDepth * d, D);
          #pragma unroll
          for (int m = 0; m < kM; ++m) {
            F::mma(scores[m][j], q_fragments[m][0], k_first);
            F::mma(scores[m][j], q_fragments[m][1], k_second);
            F::mma(grad_weights[m][j], g_fragments[m][0], v_first);
            F::mma(grad_weights[m][j], g_fragments[m][1], v_second);
          }
        }
      }

      // 2. dS = P (dP f - D) into `grad_weights`, as the backward computes it.
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
            const int64_t i = row0 + warp_row + 16 * m + group + 8 * (e / 2);
            const int64_t key = key0 + 8 * j + pair + e % 2;
            if (i >= L || key >= S) {
              grad_weights[m][j][e] = 0.0f;
              continue;
            }
            grad_weights[m][j][e] = score_backward(layout, args, dropout, n, i, key, plain_tile, scale_log2,
                                                   scores[m][j][e], grad_weights[m][j][e], row_lse[m][e / 2],
                                                   row_d[m][e / 2])
                                        .grad_score;
          }
        }
      }

      // 3. dQ += dS k. dS's A fragment for the keys of step s comes from its fragments in
      // registers; k's B fragments from its rows, as the forward's v.
      #pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        uint32_t ds_fragments[kM][4];
        #pragma unroll
        for (int m = 0; m < kM; ++m) F::a_from_accumulators(ds_fragments[m], grad_weights[m], s);
        #pragma unroll
        for (int o = 0; o < kOut; o += 2) {
          uint32_t first[2], second[2];
          F::b_pair_from_rows(first, second, k_tile, F::kDepth * s, 8 * o, D);
          #pragma unroll
          for (int m = 0; m < kM; ++m) {
            F::mma(grad_q[m][o], ds_fragments[m], first);
            F::mma(grad_q[m][o + 1], ds_fragments[m], second);
          }
        }
      }
      __syncthreads();  // every warp is done with this stage before a copy replaces it
    }
    cp_async_wait<0>();  // nothing stays in flight (something does only when no tile ran)

    // dQ times the scale, added into the float32 buffer: each element by this one thread.
    #pragma unroll
    for (int m = 0; m < kM; ++m) {
      #pragma unroll
      for (int o = 0; o < kOut; ++o) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t i = row0 + warp_row + 16 * m + group + 8 * (e / 2);
          const int64_t c = 8 * o + pair + e % 2;
          if (i < L && c < layout.embed) {
            args.grad_q[layout.offset(kAttentionGradQ, n, i, c)] += grad_q[m][o][e] * float(args.scale);
          }
        }
      }
    }
    __syncthreads();  // before the next matrix replaces q, dO, k and v
  }
#endif
}

}  // namespace ember::cuda
