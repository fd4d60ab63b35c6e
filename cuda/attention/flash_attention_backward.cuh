// Fused attention's backward for bfloat16 and float16 (and float32 on TF32, where allowed: see
// cuda/attention/mma_fragments.cuh) in FlashAttention-2's order, on mma.sync:
// key blocks outer, dK and dV accumulated in registers over every query tile, the row term
// D = rowsum(dO o O) computed before (cuda/attention/attention.cu's pre-pass), dQ added into a float32
// buffer by atomics from registers.
//
// A block takes `Keys` keys of one matrix with `Warps` warps; warp w owns the keys
// [w R, w R + R), R = Keys / Warps, as R / 16 m16 fragments. k and v stay in shared memory for
// the whole block; the block walks the queries `Queries` at a time, q and grad_out arriving by
// cp.async (with two stages, the next tile's copy runs under this tile's products). Per tile:
//
//   1. S^T = k q^T and dP^T = v dO^T for the warp's keys, on tensor cores: k's and v's rows are
//      A fragments (ldmatrix), q's and dO's rows B fragments (ldmatrix, no transpose).
//   2. In registers, element by element (lane l holds keys g = l / 4 and g + 8 of a fragment,
//      queries 2 (l % 4) and 2 (l % 4) + 1 of each 8): P = exp2(S scale log2(e) - lse log2(e)),
//      from the forward's log-sum-exp; the dropout factor f; W = P f and dS = P (dP f - D),
//      zero past the lengths and where masked.
//   3. dV += W^T dO and dK += dS^T q: W^T and dS^T, rounded to 16 bits in registers, are the A
//      operands (their accumulator layout is the A layout, two n8 fragments at a time); dO's and
//      q's B fragments by ldmatrix.trans. The roundings of W and dS are the ones the WMMA path has.
//   4. dS^T goes to shared memory (16-bit), and after a barrier warp w computes dQ for queries
//      [w Q', w Q' + Q') of the tile, Q' = Queries / Warps: dS (dS^T read by ldmatrix.trans)
//      times k (ldmatrix.trans), added into grad_q's float32 buffer times the scale.
//
// At the end dK (times the scale) and dV are rounded once and stored. Causal blocks skip the
// query tiles wholly above their first key. Checked on the CPU by tests/cuda_emulation/.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/attention/flash_attention_forward.cuh"

namespace ember::cuda {

// One element of the backward, as the backward and the deterministic dQ pass
// (flash_attention_grad_q.cuh) both compute it, from the raw products s = q . k and dP = dO . v and
// the row's log-sum-exp (times log2(e)) and D:
//   P = exp2(s scale log2(e) - lse log2(e)), s masked first unless the tile needs no mask;
//   the weight W = P f (f: the dropout factor) and dS = P (dP f - D), 0 where masked
//   (masked_fill's backward). A row with no key has lse +inf: P = 0, no weight, no gradient.
struct ScoreBackward {
  float weight, grad_score;
};

template <class T>
__device__ __forceinline__ ScoreBackward score_backward(const AttentionLayout& layout, const AttentionPointers<T>& args,
                                                        const WeightsDropout<T>& dropout, int64_t n, int64_t i,
                                                        int64_t key, bool plain_tile, float scale_log2, float score,
                                                        float grad_weight, float lse_log2, float row_d) {
  const float s = plain_tile ? score * scale_log2 : masked_score(layout, args, n, i, key, score) * kLog2E;
  const float probability = exp2f(s - lse_log2);
  const float factor = dropout.factor(layout, n, i, key);
  float grad_score = probability * (grad_weight * factor - row_d);
  if (!plain_tile && is_masked_out(layout, args, n, i, key)) grad_score = 0.0f;
  return {probability * factor, grad_score};
}

template <class T, int D, int Queries, int Keys, int Warps, int Stages>
__global__ void __launch_bounds__(32 * Warps)
    flash_attention_backward(AttentionLayout layout, AttentionPointers<T> args) {
#if EMBER_FLASH_DEVICE_CODE
  constexpr FlashTile kTile{Queries, Keys, Warps, Stages};
  static_assert(flash_backward_tile_is_valid(kTile), "a tile of whole fragments");
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  using F = MmaFragments<T>;
  constexpr int kThreads = 32 * Warps;
  constexpr int kWarpKeys = Keys / Warps;
  constexpr int kM = kWarpKeys / 16;             // m16 fragments of keys per warp
  constexpr int kN = Queries / 8;                // n8 fragments of queries
  constexpr int kDepth = D / F::kDepth;          // k steps over the head dim
  constexpr int kOut = D / 8;                    // n8 fragments of dK, dV and dQ
  constexpr int kSteps = Queries / F::kDepth;    // k steps over the queries (dV, dK)
  constexpr int kWarpQueries = Queries / Warps;  // dQ rows per warp
  constexpr int kQ = kWarpQueries / 16;
  constexpr int kKeySteps = Keys / F::kDepth;  // k steps over the block's keys (dQ)
  constexpr FlashBackwardPlan plan = flash_backward_plan(D, kTile, sizeof(T));

  unsigned char* const shared = dynamic_shared_memory();
  T* const k_tile = reinterpret_cast<T*>(shared + plan.k);
  T* const v_tile = reinterpret_cast<T*>(shared + plan.v);
  T* const q_tiles = reinterpret_cast<T*>(shared + plan.q);
  T* const grad_out_tiles = reinterpret_cast<T*>(shared + plan.grad_out);
  T* const grad_scores_tile = reinterpret_cast<T*>(shared + plan.grad_scores);  // dS^T, Keys x Queries
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, pair = 2 * (lane % 4);
  const int64_t L = layout.target_length, S = layout.source_length;
  const int64_t key0 = int64_t(blockIdx.x) * Keys;
  const int warp_key = warp * kWarpKeys;  // the warp's first key, in the block
  const WeightsDropout<T> dropout(args);
  const float scale_log2 = float(args.scale) * kLog2E;
  const bool no_mask = !args.is_causal && args.allowed == nullptr && args.added == nullptr;
  const bool need_scores = args.grad_q != nullptr || args.grad_k != nullptr;
  // A causal key j is seen by queries i >= j only.
  const int64_t query_begin = args.is_causal ? key0 : 0;
  const int tiles = query_begin < L ? static_cast<int>((L - query_begin + Queries - 1) / Queries) : 0;

  for (int64_t n = blockIdx.y; n < layout.matrices; n += gridDim.y) {
    copy_tile_async<D, Keys, kThreads>(k_tile, args.k, layout, kAttentionK, n, key0, S, layout.embed);
    copy_tile_async<D, Keys, kThreads>(v_tile, args.v, layout, kAttentionV, n, key0, S, layout.value_embed);
    if (tiles > 0) {
      copy_tile_async<D, Queries, kThreads>(q_tiles, args.q, layout, kAttentionQ, n, query_begin, L, layout.embed);
      copy_tile_async<D, Queries, kThreads>(grad_out_tiles, args.grad_out, layout, kAttentionGradOut, n, query_begin, L,
                                            layout.value_embed);
    }
    cp_async_commit();

    float grad_k[kM][kOut][4], grad_v[kM][kOut][4];
    zero_fill(grad_k);
    zero_fill(grad_v);

    for (int tile = 0; tile < tiles; ++tile) {
      const int64_t row0 = query_begin + int64_t(tile) * Queries;
      if (Stages == 1 && tile > 0) {
        copy_tile_async<D, Queries, kThreads>(q_tiles, args.q, layout, kAttentionQ, n, row0, L, layout.embed);
        copy_tile_async<D, Queries, kThreads>(grad_out_tiles, args.grad_out, layout, kAttentionGradOut, n, row0, L,
                                              layout.value_embed);
        cp_async_commit();
      }
      if (Stages == 2 && tile + 1 < tiles) {
        const int next = (tile + 1) % 2;
        copy_tile_async<D, Queries, kThreads>(q_tiles + next * Queries * D, args.q, layout, kAttentionQ, n,
                                              row0 + Queries, L, layout.embed);
        copy_tile_async<D, Queries, kThreads>(grad_out_tiles + next * Queries * D, args.grad_out, layout,
                                              kAttentionGradOut, n, row0 + Queries, L, layout.value_embed);
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();  // this tile's q and dO (and k, v) are visible to every thread
      const T* const q_tile = q_tiles + (tile % Stages) * Queries * D;
      const T* const grad_out_tile = grad_out_tiles + (tile % Stages) * Queries * D;

      // 1. S^T = k q^T and dP^T = v dO^T.
      float scores[kM][kN][4], grad_weights[kM][kN][4];
      zero_fill(scores);
      zero_fill(grad_weights);
      #pragma unroll
      for (int d = 0; d < kDepth; d += 2) {
        uint32_t k_fragments[kM][2][4], v_fragments[kM][2][4];
        #pragma unroll
        for (int m = 0; m < kM; ++m) {
          #pragma unroll
          for (int h = 0; h < 2; ++h) {
            F::a_from_columns(k_fragments[m][h], k_tile, warp_key + 16 * m, F::kDepth * (d + h), D);
            if (need_scores) F::a_from_columns(v_fragments[m][h], v_tile, warp_key + 16 * m, F::kDepth * (d + h), D);
          }
        }
        #pragma unroll
        for (int j = 0; j < kN; ++j) {
          uint32_t q_first[2], q_second[2];
          F::b_pair_from_columns(q_first, q_second, q_tile, 8 * j, F::kDepth * d, D);
          #pragma unroll
          for (int m = 0; m < kM; ++m) {
            F::mma(scores[m][j], k_fragments[m][0], q_first);
            F::mma(scores[m][j], k_fragments[m][1], q_second);
          }
          if (need_scores) {
            uint32_t g_first[2], g_second[2];
            F::b_pair_from_columns(g_first, g_second, grad_out_tile, 8 * j, F::kDepth * d, D);
            #pragma unroll
            for (int m = 0; m < kM; ++m) {
              F::mma(grad_weights[m][j], v_fragments[m][0], g_first);
              F::mma(grad_weights[m][j], v_fragments[m][1], g_second);
            }
          }
        }
      }

      // 2. W = P f into `scores`, dS = P (dP f - D) into `grad_weights`.
      // A causal tile wholly at or below the diagonal (every query at or after every key) needs
      // no mask either.
      const bool inside = key0 + Keys <= S && row0 + Queries <= L;
      const bool below_diagonal = args.is_causal && row0 >= key0 + Keys - 1;
      const bool plain_tile =
          inside && (no_mask || (below_diagonal && args.allowed == nullptr && args.added == nullptr));
      #pragma unroll
      for (int m = 0; m < kM; ++m) {
        #pragma unroll
        for (int j = 0; j < kN; ++j) {
          #pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int64_t key = key0 + warp_key + 16 * m + group + 8 * (e / 2);
            const int64_t i = row0 + 8 * j + pair + e % 2;
            if (i >= L || key >= S) {  // past the lengths: no weight, no gradient
              scores[m][j][e] = grad_weights[m][j][e] = 0.0f;
              continue;
            }
            // Without dQ and dK, dP was not computed (0) and D is not there: dS comes out 0.
            const ScoreBackward element = score_backward(
                layout, args, dropout, n, i, key, plain_tile, scale_log2, scores[m][j][e], grad_weights[m][j][e],
                args.log_sum_exp[n * L + i] * kLog2E, need_scores ? args.out_dot_grad[n * L + i] : 0.0f);
            scores[m][j][e] = element.weight;
            grad_weights[m][j][e] = element.grad_score;
          }
        }
      }

// 3. dV += W^T dO, dK += dS^T q; and dS^T into shared memory for dQ.
      #pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        uint32_t w_fragments[kM][4], ds_fragments[kM][4];
        #pragma unroll
        for (int m = 0; m < kM; ++m) {
          F::a_from_accumulators(w_fragments[m], scores[m], s);
          F::a_from_accumulators(ds_fragments[m], grad_weights[m], s);
          if (args.grad_q != nullptr) {
            F::store_a(grad_scores_tile, ds_fragments[m], warp_key + 16 * m, F::kDepth * s, Queries);
          }
        }
        #pragma unroll
        for (int o = 0; o < kOut; o += 2) {
          if (args.grad_v != nullptr) {
            uint32_t first[2], second[2];
            F::b_pair_from_rows(first, second, grad_out_tile, F::kDepth * s, 8 * o, D);
            #pragma unroll
            for (int m = 0; m < kM; ++m) {
              F::mma(grad_v[m][o], w_fragments[m], first);
              F::mma(grad_v[m][o + 1], w_fragments[m], second);
            }
          }
          if (args.grad_k != nullptr) {
            uint32_t first[2], second[2];
            F::b_pair_from_rows(first, second, q_tile, F::kDepth * s, 8 * o, D);
            #pragma unroll
            for (int m = 0; m < kM; ++m) {
              F::mma(grad_k[m][o], ds_fragments[m], first);
              F::mma(grad_k[m][o + 1], ds_fragments[m], second);
            }
          }
        }
      }

      // 4. dQ for the warp's queries of the tile: dS k over the block's keys.
      if (args.grad_q != nullptr) {
        __syncthreads();  // every warp's rows of dS^T are stored
        #pragma unroll
        for (int mq = 0; mq < kQ; ++mq) {
          const int query_in = warp * kWarpQueries + 16 * mq;
          float grad_q[1][kOut][4];  // one m16 fragment: the warp's 16 queries of this step
          zero_fill(grad_q);
          #pragma unroll
          for (int ks = 0; ks < kKeySteps; ++ks) {
            // dS's A fragment (queries x keys) from dS^T's rows (the keys); k's B fragments from
            // its rows too.
            uint32_t a[4];
            F::a_from_rows(a, grad_scores_tile, F::kDepth * ks, query_in, Queries);
            #pragma unroll
            for (int o = 0; o < kOut; o += 2) {
              uint32_t first[2], second[2];
              F::b_pair_from_rows(first, second, k_tile, F::kDepth * ks, 8 * o, D);
              F::mma(grad_q[0][o], a, first);
              F::mma(grad_q[0][o + 1], a, second);
            }
          }
          #pragma unroll
          for (int o = 0; o < kOut; ++o) {
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int64_t i = row0 + query_in + group + 8 * (e / 2);
              const int64_t c = 8 * o + pair + e % 2;
              if (i < L && c < layout.embed) {
                atomicAdd(args.grad_q + layout.offset(kAttentionGradQ, n, i, c), grad_q[0][o][e] * float(args.scale));
              }
            }
          }
        }
      }
      __syncthreads();  // every warp is done with this stage and dS^T before they are replaced
    }
    cp_async_wait<0>();  // nothing stays in flight (something does only when no tile ran)

// dK (times the scale) and dV, rounded once.
    #pragma unroll
    for (int m = 0; m < kM; ++m) {
      #pragma unroll
      for (int o = 0; o < kOut; ++o) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t key = key0 + warp_key + 16 * m + group + 8 * (e / 2);
          const int64_t c = 8 * o + pair + e % 2;
          if (key >= S) continue;
          if (args.grad_k != nullptr && c < layout.embed) {
            args.grad_k[layout.offset(kAttentionGradK, n, key, c)] = round_to<T>(grad_k[m][o][e] * float(args.scale));
          }
          if (args.grad_v != nullptr && c < layout.value_embed) {
            args.grad_v[layout.offset(kAttentionGradV, n, key, c)] = round_to<T>(grad_v[m][o][e]);
          }
        }
      }
    }
    __syncthreads();  // before the next matrix replaces k and v
  }
#endif
}

}  // namespace ember::cuda
