// The tensor-core path of fused attention for bfloat16 and float16, forward and backward, in the
// manner of FlashAttention-2: q, k, v and grad_out tiles stay 16-bit in shared memory and every
// product runs on tensor cores with float32 accumulation; the online softmax, the log-sum-exp and
// every accumulator are float32. cuda/attention/attention.cu chooses it (attention_uses_tensor_cores in
// cuda/attention/attention_tensor_core_plan.h) and runs the float32-tile kernel otherwise.
//
// Products: the WMMA API (nvcuda::wmma), 16 x 16 x 16 bf16 / fp16 fragments and float
// accumulators. Its fragments are opaque (which lane holds which element is not part of the
// API), so there is no per-lane index arithmetic to get wrong; the price is that a softmax cannot
// read scores where the product left them: every score tile goes through shared memory (stored
// as float, read by lanes at known places), as does the forward's output accumulator, which the
// online softmax rescales row by row between products. mma.sync with its documented register
// layout would keep both in registers, at the cost of that layout's index arithmetic.
//
// Forward. A block (4 warps, 128 threads) takes 64 queries of one matrix; warp w owns queries
// [16 w, 16 w + 16) of the tile, and everything per row stays inside the warp. For each 64-key
// tile (k and v loaded into shared memory by the whole block): the warp's 16 x 64 scores
// q k^T (contracted over the head dim, zero-padded to 64 or 128), stored as float; lanes 2r and
// 2r + 1 share row r (alternate columns): mask, running max and sum, exp, the dropout factor;
// the weights exp(S - m) f are rounded to 16 bits (P, for the P v product: the one rounding the
// tensor-core path adds to the forward) while the running sum l adds the float values; the
// warp's float output rows are rescaled by exp(m_old - m_new) and P v is added on tensor cores.
// At the end out = acc / l, rounded once, and lse = m + log(l).
//
// Backward. A block takes 64 keys; warp w owns keys [16 w, 16 w + 16). For each 64-query tile
// (q and grad_out loaded, with each query's lse and D = rowsum(dO O) from the pre-pass in
// cuda/attention/attention.cu), the warp computes its 16 x 64 strip of S^T = k q^T and dP^T = v dO^T (as
// float), then per element P = exp(S - lse), W = P f and dS = P (dP f - D) (zero where masked),
// as the float32 kernel does, stored transposed and rounded to 16 bits (W for W^T dO, dS for
// dS^T q and dS k: the roundings this path adds). dV += W^T dO and dK += dS^T q accumulate in
// the warp's WMMA accumulators (registers) over every query tile; dQ += dS k needs the whole
// block's dS, so after a block barrier warp w computes the dQ rows of queries [16 w, 16 w + 16)
// (dS read as the column-major view of the stored dS^T) and adds them into grad_q's float32
// buffer with atomics, through a 16 x 16 float scratch.
//
// Tails. Loads zero-fill rows past L or S and columns past E or Ev, so products over padding add
// zeros; masked_score puts -inf past the lengths, weights and dS past them are 0, and stores are
// guarded. A row with no key keeps max -inf; its exps are taken against 0 (exp(-inf) = 0, not
// exp(-inf - -inf) = NaN), so its sum ends 0: it is written as out 0 with lse +inf (zero
// weights and gradients in backward), as the float32 kernel and the CPU give. Masks, dropout (the same Philox counters and keep rule) and scale are those of
// cuda/attention/attention_device.cuh, shared with the float32 kernel.
//
// Shared memory (cuda/attention/attention_tensor_core_plan.h): forward 70 KiB (head dim 64) or 110 KiB
// (128); backward 92.5 or 124.5 KiB. Needs compute capability 8.0 (bf16 WMMA); the device code is
// compiled only there, and the launcher never picks this path on an older device.
#include <mma.h>

#include <cstdint>

#include "cuda/attention/attention_device.cuh"
#include "cuda/attention/attention_tensor_core_plan.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = kTensorCoreTile;
constexpr int kThreads = kTensorCoreThreads;
constexpr int kFragment = 16;  // WMMA's m = n = k
constexpr unsigned kFullWarp = 0xffffffffu;
static_assert(kTensorCoreWarps * kFragment == kTile, "each warp owns 16 of a tile's 64 rows");
static_assert(2 * kFragment == 32, "forward: lanes 2r and 2r + 1 share row r of the warp's 16");
static_assert(kTile == 2 * 32, "backward: lane l takes queries l and l + 32 of the tile's 64");

template <class T>
using RowMajorA = wmma::fragment<wmma::matrix_a, kFragment, kFragment, kFragment, T, wmma::row_major>;
template <class T>
using ColumnMajorA = wmma::fragment<wmma::matrix_a, kFragment, kFragment, kFragment, T, wmma::col_major>;
template <class T>
using RowMajorB = wmma::fragment<wmma::matrix_b, kFragment, kFragment, kFragment, T, wmma::row_major>;
template <class T>
using ColumnMajorB = wmma::fragment<wmma::matrix_b, kFragment, kFragment, kFragment, T, wmma::col_major>;
using Accumulator = wmma::fragment<wmma::accumulator, kFragment, kFragment, kFragment, float>;

// The buffer at `offset` bytes into the block's dynamic shared memory (the kernels have no static
// shared memory, so offset 0 is the start of the allocation, aligned as declared).
template <class E>
__device__ inline E* shared_buffer(size_t offset) {
  extern __shared__ __align__(128) unsigned char tensor_core_shared[];
  return reinterpret_cast<E*>(tensor_core_shared + offset);
}

// Rows [row0, row0 + 64) and columns [0, D) of matrix n of `operand` into a 16-bit tile of pitch
// D + 8, zeros past `rows` and `cols` (cols <= D). Rows of unit column stride, 16-byte aligned
// and a multiple of 8 elements long, are copied 16 bytes at a time; any other layout element by
// element.
template <int D, class T>
__device__ inline void load_operand(T* tile, const T* data, const AttentionLayout& layout, int operand, int64_t n,
                                    int64_t row0, int64_t rows, int64_t cols) {
  constexpr int pitch = tensor_core_operand_pitch(D);
  const T* matrix = data + layout.matrix_offset(operand, n);
  const int64_t row_stride = layout.row_stride[operand], col_stride = layout.col_stride[operand];
  const bool vectors = col_stride == 1 && cols % 8 == 0 && row_stride % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(matrix) % 16 == 0;
  if (vectors) {
    constexpr int chunks = D / 8;  // 8 elements of 2 bytes
    for (int t = threadIdx.x; t < kTile * chunks; t += kThreads) {
      const int r = t / chunks, c = (t % chunks) * 8;
      const int64_t row = row0 + r;
      uint4 chunk = make_uint4(0, 0, 0, 0);
      if (row < rows && c < cols) chunk = *reinterpret_cast<const uint4*>(matrix + row * row_stride + c);
      *reinterpret_cast<uint4*>(tile + r * pitch + c) = chunk;
    }
  } else {
    for (int t = threadIdx.x; t < kTile * D; t += kThreads) {
      const int r = t / D, c = t % D;
      const int64_t row = row0 + r;
      tile[r * pitch + c] = row < rows && c < cols ? matrix[row * row_stride + c * col_stride] : round_to<T>(0.0f);
    }
  }
}

// out = a b^T: 16 rows of `a` against 64 rows of `b` (16-bit tiles of pitch D + 8, contracted over
// their D columns) into a 16 x 64 float strip of pitch kTensorCoreScoresPitch. b read
// column-major is b^T.
template <int D, class T>
__device__ inline void product_with_transposed(float* out, const T* a, const T* b) {
  constexpr int pitch = tensor_core_operand_pitch(D);
  #pragma unroll
  for (int column_block = 0; column_block < kTile / kFragment; ++column_block) {
    Accumulator product;
    wmma::fill_fragment(product, 0.0f);
    #pragma unroll
    for (int d = 0; d < D; d += kFragment) {
      RowMajorA<T> a_fragment;
      ColumnMajorB<T> b_fragment;
      wmma::load_matrix_sync(a_fragment, a + d, pitch);
      wmma::load_matrix_sync(b_fragment, b + column_block * kFragment * pitch + d, pitch);
      wmma::mma_sync(product, a_fragment, b_fragment, product);
    }
    wmma::store_matrix_sync(out + column_block * kFragment, product, kTensorCoreScoresPitch, wmma::mem_row_major);
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    attention_forward_tensor_cores(AttentionLayout layout, AttentionPointers<T> args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr TensorCoreForwardPlan plan = tensor_core_forward_plan(D);
  constexpr int pitch = tensor_core_operand_pitch(D), out_pitch = tensor_core_out_pitch(D);
  constexpr int scores_pitch = kTensorCoreScoresPitch, weights_pitch = kTensorCoreWeightsPitch;
  T* const q_tile = shared_buffer<T>(plan.q);
  T* const k_tile = shared_buffer<T>(plan.k);
  T* const v_tile = shared_buffer<T>(plan.v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // This warp's 16 rows of the scores, the weights and the output accumulator.
  float* const scores = shared_buffer<float>(plan.scores) + warp * kFragment * scores_pitch;
  T* const weights = shared_buffer<T>(plan.weights) + warp * kFragment * weights_pitch;
  float* const out_rows = shared_buffer<float>(plan.out) + warp * kFragment * out_pitch;
  // Lanes 2r and 2r + 1 share the warp's row r: columns r_half, r_half + 2, ...
  const int r = lane / 2, r_half = lane % 2;
  const int64_t L = layout.target_length, S = layout.source_length;
  const int64_t row0 = int64_t(blockIdx.x) * kTile;
  const int64_t i = row0 + warp * kFragment + r;
  const WeightsDropout<T> dropout(args);
  // A causal row i sees keys j <= i: this tile's rows see none past row0 + 63.
  const int64_t key_end = args.is_causal && row0 + kTile < S ? row0 + kTile : S;

  for (int64_t n = blockIdx.y; n < layout.matrices; n += gridDim.y) {
    float running_max = minus_infinity<float>(), running_sum = 0;
    for (int c = r_half; c < D; c += 2) out_rows[r * out_pitch + c] = 0;
    load_operand<D>(q_tile, args.q, layout, kAttentionQ, n, row0, L, layout.embed);
    for (int64_t key0 = 0; key0 < key_end; key0 += kTile) {
      load_operand<D>(k_tile, args.k, layout, kAttentionK, n, key0, S, layout.embed);
      load_operand<D>(v_tile, args.v, layout, kAttentionV, n, key0, S, layout.value_embed);
      __syncthreads();
      product_with_transposed<D>(scores, q_tile + warp * kFragment * pitch, k_tile);  // q k^T
      __syncwarp();
      float tile_max = minus_infinity<float>();
      for (int c = r_half; c < kTile; c += 2) {
        const float s = masked_score(layout, args, n, i, key0 + c, scores[r * scores_pitch + c]);
        scores[r * scores_pitch + c] = s;
        tile_max = fmaxf(tile_max, s);
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarp, tile_max, 1));
      const float new_max = fmaxf(running_max, tile_max);
      // A row with no key seen yet keeps max -inf: exponentiate against 0 so that its masked
      // scores give exp(-inf) = 0, not exp(-inf - -inf) = NaN.
      const float base = new_max == minus_infinity<float>() ? 0.0f : new_max;
      const float rescale = exp(running_max - base);
      float tile_sum = 0;
      for (int c = r_half; c < kTile; c += 2) {
        const float e = exp(scores[r * scores_pitch + c] - base);
        tile_sum += e;
        const int64_t j = key0 + c;
        const float factor = i < L && j < S ? dropout.factor(layout, n, i, j) : 1.0f;
        weights[r * weights_pitch + c] = round_to<T>(e * factor);
      }
      tile_sum += __shfl_xor_sync(kFullWarp, tile_sum, 1);
      running_sum = running_sum * rescale + tile_sum;
      running_max = new_max;
      for (int c = r_half; c < D; c += 2) out_rows[r * out_pitch + c] *= rescale;
      __syncwarp();
      // out += P v, the accumulator read from and written back to the warp's output rows.
      #pragma unroll
      for (int col = 0; col < D; col += kFragment) {
        Accumulator acc;
        wmma::load_matrix_sync(acc, out_rows + col, out_pitch, wmma::mem_row_major);
        #pragma unroll
        for (int key_block = 0; key_block < kTile / kFragment; ++key_block) {
          RowMajorA<T> a;
          RowMajorB<T> b;
          wmma::load_matrix_sync(a, weights + key_block * kFragment, weights_pitch);
          wmma::load_matrix_sync(b, v_tile + key_block * kFragment * pitch + col, pitch);
          wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(out_rows + col, acc, out_pitch, wmma::mem_row_major);
      }
      __syncthreads();  // every warp is done with k and v before the next tile replaces them
    }
    __syncwarp();
    if (i < L) {
      // A row that saw no key (all masked) attends to nothing: out 0, and lse +inf so that the
      // backward's exp(S - lse) gives it zero weights and zero gradients, as on the CPU.
      const bool attended = running_sum > 0.0f;
      for (int c = r_half; c < layout.value_embed; c += 2) {
        const float value = attended ? out_rows[r * out_pitch + c] / running_sum : 0.0f;
        args.out[layout.offset(kAttentionOut, n, i, c)] = round_to<T>(value);
      }
      if (r_half == 0) {
        args.log_sum_exp[n * L + i] = attended ? running_max + log(running_sum) : -minus_infinity<float>();
      }
    }
    __syncthreads();  // before the next matrix replaces the q tile
  }
#endif
}

// acc[c] += a b[:, 16 c : 16 c + 16] for the D / 16 column blocks c: a is a warp's 16 x 64 strip
// (16-bit, pitch kTensorCoreWeightsPitch), b a 64 x D tile (pitch D + 8).
template <int D, class T>
__device__ __forceinline__ void accumulate_strip_product(Accumulator (&acc)[D / kFragment], const T* a, const T* b) {
  constexpr int pitch = tensor_core_operand_pitch(D);
  #pragma unroll
  for (int k = 0; k < kTile; k += kFragment) {
    RowMajorA<T> a_fragment;
    wmma::load_matrix_sync(a_fragment, a + k, kTensorCoreWeightsPitch);
    #pragma unroll
    for (int c = 0; c < D / kFragment; ++c) {
      RowMajorB<T> b_fragment;
      wmma::load_matrix_sync(b_fragment, b + k * pitch + c * kFragment, pitch);
      wmma::mma_sync(acc[c], a_fragment, b_fragment, acc[c]);
    }
  }
}

// A warp's 16 x 16 float accumulator, times `scale`, at rows [row0, +16) and columns
// [col0, +16) of matrix n of `operand` (those inside `rows` and `cols`), through the warp's
// scratch: added atomically into `added_to` (grad_q's float32 buffer) if given, else stored
// rounded into `rounded_to`.
template <class T>
__device__ inline void store_gradient(const Accumulator& acc, float* scratch, float scale, T* rounded_to,
                                      float* added_to, const AttentionLayout& layout, int operand, int64_t n,
                                      int64_t row0, int64_t rows, int64_t col0, int64_t cols) {
  wmma::store_matrix_sync(scratch, acc, kFragment, wmma::mem_row_major);
  __syncwarp();
  for (int e = threadIdx.x % 32; e < kFragment * kFragment; e += 32) {
    const int64_t row = row0 + e / kFragment, col = col0 + e % kFragment;
    if (row >= rows || col >= cols) continue;
    const int64_t at = layout.offset(operand, n, row, col);
    if (added_to != nullptr) {
      atomicAdd(added_to + at, scale * scratch[e]);
    } else {
      rounded_to[at] = round_to<T>(scale * scratch[e]);
    }
  }
  __syncwarp();  // before the scratch takes the next fragment
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_tensor_cores(AttentionLayout layout, AttentionPointers<T> args) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr TensorCoreBackwardPlan plan = tensor_core_backward_plan(D);
  constexpr int pitch = tensor_core_operand_pitch(D);
  constexpr int scores_pitch = kTensorCoreScoresPitch, weights_pitch = kTensorCoreWeightsPitch;
  constexpr int kColumnBlocks = D / kFragment, kBlocks = kTile / kFragment;
  T* const q_tile = shared_buffer<T>(plan.q);
  T* const k_tile = shared_buffer<T>(plan.k);
  T* const v_tile = shared_buffer<T>(plan.v);
  T* const grad_out_tile = shared_buffer<T>(plan.grad_out);
  // dS^T of the whole block: warp w writes rows [16 w, +16) (its keys); dQ reads all of it.
  T* const grad_scores_all = shared_buffer<T>(plan.grad_scores);
  float* const query_lse = shared_buffer<float>(plan.log_sum_exp);
  float* const query_term = shared_buffer<float>(plan.row_term);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // This warp's keys' rows of S^T, dP^T, W^T and dS^T, and its scratch.
  float* const scores = shared_buffer<float>(plan.scores) + warp * kFragment * scores_pitch;
  float* const grad_weights = shared_buffer<float>(plan.grad_weights) + warp * kFragment * scores_pitch;
  T* const weights = shared_buffer<T>(plan.weights) + warp * kFragment * weights_pitch;
  T* const grad_scores = grad_scores_all + warp * kFragment * weights_pitch;
  float* const scratch = shared_buffer<float>(plan.scratch) + warp * kFragment * kFragment;
  const int64_t L = layout.target_length, S = layout.source_length, E = layout.embed, Ev = layout.value_embed;
  const int64_t key0 = int64_t(blockIdx.x) * kTile;
  const int64_t warp_key0 = key0 + warp * kFragment;
  const WeightsDropout<T> dropout(args);
  const bool need_scores = args.grad_q != nullptr || args.grad_k != nullptr;
  // A causal key j is seen by queries i >= j only.
  const int64_t query_begin = args.is_causal ? key0 : 0;

  for (int64_t n = blockIdx.y; n < layout.matrices; n += gridDim.y) {
    Accumulator grad_k[kColumnBlocks], grad_v[kColumnBlocks];
    #pragma unroll
    for (int c = 0; c < kColumnBlocks; ++c) {
      wmma::fill_fragment(grad_k[c], 0.0f);
      wmma::fill_fragment(grad_v[c], 0.0f);
    }
    load_operand<D>(k_tile, args.k, layout, kAttentionK, n, key0, S, E);
    load_operand<D>(v_tile, args.v, layout, kAttentionV, n, key0, S, Ev);
    for (int64_t row0 = query_begin; row0 < L; row0 += kTile) {
      load_operand<D>(q_tile, args.q, layout, kAttentionQ, n, row0, L, E);
      load_operand<D>(grad_out_tile, args.grad_out, layout, kAttentionGradOut, n, row0, L, Ev);
      for (int t = threadIdx.x; t < kTile; t += kThreads) {
        const int64_t i = row0 + t;
        query_lse[t] = i < L ? args.log_sum_exp[n * L + i] : 0.0f;
        query_term[t] = i < L && need_scores ? args.out_dot_grad[n * L + i] : 0.0f;
      }
      __syncthreads();
      // S^T = k q^T and dP^T = v dO^T for the warp's keys.
      product_with_transposed<D>(scores, k_tile + warp * kFragment * pitch, q_tile);
      if (need_scores) product_with_transposed<D>(grad_weights, v_tile + warp * kFragment * pitch, grad_out_tile);
      __syncwarp();
      // Lane l takes queries l and l + 32 of each of the warp's 16 keys.
      for (int key = 0; key < kFragment; ++key) {
        const int64_t j = warp_key0 + key;
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int c = lane + 32 * half;
          const int64_t i = row0 + c;
          if (i >= L || j >= S) {  // past the lengths: no weight, no gradient
            weights[key * weights_pitch + c] = round_to<T>(0.0f);
            grad_scores[key * weights_pitch + c] = round_to<T>(0.0f);
            continue;
          }
          const float s = masked_score(layout, args, n, i, j, scores[key * scores_pitch + c]);
          // A row with no key has lse +inf: exp(S - lse) = 0, zero weights, as on the CPU.
          const float probability = exp(s - query_lse[c]);
          const float factor = dropout.factor(layout, n, i, j);
          float grad_score =
              need_scores ? probability * (grad_weights[key * scores_pitch + c] * factor - query_term[c]) : 0.0f;
          if (is_masked_out(layout, args, n, i, j)) grad_score = 0;  // masked_fill's backward
          weights[key * weights_pitch + c] = round_to<T>(probability * factor);
          grad_scores[key * weights_pitch + c] = round_to<T>(grad_score);
        }
      }
      __syncwarp();
      // dV += W^T dO and dK += dS^T q, over this tile's 64 queries.
      if (args.grad_v != nullptr) accumulate_strip_product<D>(grad_v, weights, grad_out_tile);
      if (args.grad_k != nullptr) accumulate_strip_product<D>(grad_k, grad_scores, q_tile);
      if (args.grad_q != nullptr) {
        __syncthreads();  // every warp's rows of dS^T are written
        // dQ for queries [16 w, +16) of the tile: dS = (dS^T)^T, read column-major.
        #pragma unroll
        for (int c = 0; c < kColumnBlocks; ++c) {
          if (c * kFragment >= E) break;
          Accumulator product;
          wmma::fill_fragment(product, 0.0f);
          #pragma unroll
          for (int key_block = 0; key_block < kBlocks; ++key_block) {
            ColumnMajorA<T> a;
            RowMajorB<T> b;
            wmma::load_matrix_sync(a, grad_scores_all + key_block * kFragment * weights_pitch + warp * kFragment,
                                   weights_pitch);
            wmma::load_matrix_sync(b, k_tile + key_block * kFragment * pitch + c * kFragment, pitch);
            wmma::mma_sync(product, a, b, product);
          }
          store_gradient<T>(product, scratch, args.scale, nullptr, args.grad_q, layout, kAttentionGradQ, n,
                            row0 + warp * kFragment, L, c * kFragment, E);
        }
      }
      __syncthreads();  // before the next query tile replaces q, grad_out, lse, D and dS^T
    }
    #pragma unroll
    for (int c = 0; c < kColumnBlocks; ++c) {
      if (args.grad_v != nullptr && c * kFragment < Ev) {
        store_gradient<T>(grad_v[c], scratch, 1.0f, args.grad_v, nullptr, layout, kAttentionGradV, n, warp_key0, S,
                          c * kFragment, Ev);
      }
      if (args.grad_k != nullptr && c * kFragment < E) {
        store_gradient<T>(grad_k[c], scratch, args.scale, args.grad_k, nullptr, layout, kAttentionGradK, n,
                          warp_key0, S, c * kFragment, E);
      }
    }
    __syncthreads();  // before the next matrix replaces the k and v tiles
  }
#endif
}

// The kernel for head dim D, its shared memory allowed once.
template <class T, int D>
void forward_with(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  constexpr size_t shared = tensor_core_forward_plan(D).bytes;
  allow_shared_memory(attention_forward_tensor_cores<T, D>, shared, "attention");
  const dim3 grid(attention_tiles(layout.target_length), attention_matrix_blocks(layout.matrices), 1);
  attention_forward_tensor_cores<T, D><<<grid, kThreads, shared, current_stream()>>>(layout, args);
  check_launch("attention");
}

template <class T, int D>
void backward_with(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  constexpr size_t shared = tensor_core_backward_plan(D).bytes;
  allow_shared_memory(attention_backward_tensor_cores<T, D>, shared, "attention_backward");
  const dim3 grid(attention_tiles(layout.source_length), attention_matrix_blocks(layout.matrices), 1);
  attention_backward_tensor_cores<T, D><<<grid, kThreads, shared, current_stream()>>>(layout, args);
  check_launch("attention_backward");
}

}  // namespace

template <class T>
void launch_attention_forward_tensor_cores(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (tensor_core_head_dim(layout.embed, layout.value_embed) == 64) {
    forward_with<T, 64>(layout, args);
  } else {
    forward_with<T, 128>(layout, args);
  }
}

template <class T>
void launch_attention_backward_tensor_cores(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (tensor_core_head_dim(layout.embed, layout.value_embed) == 64) {
    backward_with<T, 64>(layout, args);
  } else {
    backward_with<T, 128>(layout, args);
  }
}

#define EMBER_INSTANTIATE(T)                                                                                      \
  template void launch_attention_forward_tensor_cores<T>(const AttentionLayout&, const AttentionPointers<T>&); \
  template void launch_attention_backward_tensor_cores<T>(const AttentionLayout&, const AttentionPointers<T>&);
EMBER_INSTANTIATE(__nv_bfloat16)
EMBER_INSTANTIATE(__half)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
