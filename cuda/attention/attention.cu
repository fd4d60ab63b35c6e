// Fused scaled dot-product attention on CUDA, forward and backward, in the manner of
// FlashAttention (Dao et al., 2022; FlashAttention-2, 2023): the L x S scores never reach
// global memory.
//
// Forward. A block takes 64 rows of queries of one matrix and walks the keys 64 at a time. For
// each key tile it computes the scores S = scale q k^T + mask in shared memory, and keeps per
// row a running maximum m and a running sum l of exp(S - m) (the online softmax): when a new
// tile raises the maximum, what was accumulated so far is rescaled by exp(m_old - m_new). The
// output accumulates exp(S - m) * dropout v, and is divided by l at the end. Besides the
// output, each row's log-sum-exp m + log(l) is written: the softmax is exp(S - lse).
//
// Backward. A first kernel computes D_i = sum_v dO_iv O_iv (which equals sum_j P_ij dP_ij, the
// softmax backward's row term, dropout included). Then a block takes 64 keys of one matrix and
// walks the queries 64 at a time: it recomputes P = exp(S - lse) for the tile, and with the
// dropout factors f (drawn again from the same Philox counters) W = P f, dP = (dO v^T) f and
// dS = P (dP - D). It accumulates dV += W^T dO and dK += scale dS^T q in registers over all the
// queries, and adds dQ += scale dS k into global memory with atomics (other blocks add the
// contributions of the other keys).
//
// Threads. 256 threads see a 64 x 64 tile as a 16 x 16 grid: thread (ty, tx) owns rows ty + 16r
// and columns tx + 16c (r, c < 4). A row's 16 owners are 16 adjacent lanes of one warp, so row
// maxima and sums are warp shuffles. Tiles in shared memory have 65 columns: the column
// padding keeps both row-wise and column-wise reads free of bank conflicts.
//
// Head dims. The products contract over the head dims 64 at a time, so any E and Ev work; each
// block produces 64 columns of the outputs (out, or dQ, dK and dV), and the grid's z dimension
// covers wider head dims. With E, Ev <= 64 (the common case) every tile is loaded once.
//
// bfloat16 and float16 (and float32 while allow_tf32()). Forward and backward each first try the
// mma.sync kernels of cuda/attention/flash_attention_forward.cuh and flash_attention_backward.cuh
// (attention_uses_flash_forward and _backward: E and Ev multiples of 8 up to 128, operands
// cp.async can copy, EMBER_ATTENTION_FLASH not 0); float32 runs them on TF32 tensor cores.
// Otherwise: when attention_uses_tensor_cores (cuda/attention/attention_tensor_core_plan.h)
// allows it (E, Ev <= 128 on a device of compute capability 8.0 or more, and
// EMBER_ATTENTION_TENSOR_CORES is not 0), 16-bit operands take the tensor-core kernels of
// cuda/attention/attention_tensor_cores.cu (16-bit tiles, WMMA products with float32 accumulation). Otherwise
// they come here: q, k, v, grad_out and an additive mask are read as float into the tiles, so every
// product, the online softmax, the log-sum-exp and the accumulators are float32 (T is the element
// type, C = compute_t<T> the arithmetic's: the float32 kernel itself); out, grad_k and grad_v are
// rounded once where stored, and grad_q adds up in a float32 buffer that the caller rounds into the
// 16-bit gradient. Every path shares the masks and dropout of cuda/attention/attention_scores.cuh,
// and the backward paths the D pre-pass below.
//
// Masks and edge cases follow the CPU kernel (core/ops/attention_cpu.cpp) exactly: a masked
// score is -inf; a row with no key to attend to gets zero weights, a zero output and zero
// gradients (lse +inf); dropout keeps element e = (n L + i) S + j
// of the weights iff uniform_float(random word e) >= p, the dropout op's own rule.
#include <atomic>
#include <cmath>
#include <cstdlib>

#include "core/cuda.h"
#include "cuda/attention/attention_device.cuh"
#include "cuda/attention/attention_tensor_core_plan.h"
#include "cuda/attention/flash_attention_plan.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

constexpr int kTile = 64;              // rows and columns of a tile, and head dims per pass
constexpr int kPitch = kTile + 1;      // a tile row in shared memory: the padding avoids bank conflicts
constexpr int kTileElements = kTile * kPitch;
constexpr int kThreads = 256;          // 16 x 16
constexpr int kPerThread = 4;          // rows (and columns) of a tile per thread: 16 * 4 = 64

// Tile `index` of the block's dynamic shared memory.
template <class T>
__device__ inline T* shared_tile(int index) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  return reinterpret_cast<T*>(shared_bytes) + index * kTileElements;
}

// Loads rows [row0, row0 + 64) and columns [col0, col0 + 64) of matrix n of `operand` into a
// tile of the compute type, with zeros beyond `rows` and `cols`. Consecutive threads read
// consecutive columns, which is coalesced for the usual unit column stride.
template <class C, class T>
__device__ inline void load_tile(C* tile, const T* data, const AttentionLayout& layout, int operand, int64_t n,
                                 int64_t row0, int64_t rows, int64_t col0, int64_t cols) {
  const int64_t base = layout.matrix_offset(operand, n);
  const int64_t row_stride = layout.row_stride[operand], col_stride = layout.col_stride[operand];
  for (int t = threadIdx.x; t < kTile * kTile; t += kThreads) {
    const int r = t / kTile, c = t % kTile;
    const int64_t row = row0 + r, col = col0 + c;
    tile[r * kPitch + c] =
        row < rows && col < cols ? to_compute(data[base + row * row_stride + col * col_stride]) : C(0);
  }
}

// acc[r][c] += sum_k a(ty + 16r, k) * b(tx + 16c, k) over the 64 k of two tiles, where
// a_at(row, k) and b_at(col, k) give the element's place in its tile: the three products below
// differ only in which operand is read transposed.
template <class T, class IndexA, class IndexB>
__device__ inline void tile_product(T (&acc)[kPerThread][kPerThread], const T* a, const T* b, IndexA a_at,
                                    IndexB b_at, int ty, int tx) {
  for (int k = 0; k < kTile; ++k) {
    T a_values[kPerThread], b_values[kPerThread];
    #pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      a_values[i] = a[a_at(ty + 16 * i, k)];
      b_values[i] = b[b_at(tx + 16 * i, k)];
    }
    #pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      #pragma unroll
      for (int c = 0; c < kPerThread; ++c) acc[r][c] += a_values[r] * b_values[c];
    }
  }
}

// Element (row, col) of a tile, and the same of the tile transposed.
struct AtRow {
  __device__ int operator()(int row, int k) const { return row * kPitch + k; }
};
struct AtColumn {
  __device__ int operator()(int col, int k) const { return k * kPitch + col; }
};

// acc += a b^T (scores from q and k), acc += a b (weights times v), acc += a^T b (the
// gradients of k and v). Tiles are read along rows or down columns; the padding keeps both
// free of bank conflicts.
template <class T>
__device__ inline void product_nt(T (&acc)[kPerThread][kPerThread], const T* a, const T* b, int ty, int tx) {
  tile_product(acc, a, b, AtRow{}, AtRow{}, ty, tx);
}
template <class T>
__device__ inline void product_nn(T (&acc)[kPerThread][kPerThread], const T* a, const T* b, int ty, int tx) {
  tile_product(acc, a, b, AtRow{}, AtColumn{}, ty, tx);
}
template <class T>
__device__ inline void product_tn(T (&acc)[kPerThread][kPerThread], const T* a, const T* b, int ty, int tx) {
  tile_product(acc, a, b, AtColumn{}, AtColumn{}, ty, tx);
}

// The max and the sum over a row's 16 owners: lanes that differ in their low 4 bits.
template <class T>
__device__ inline T row_max(T value) {
  for (int offset = 8; offset > 0; offset /= 2) value = fmax(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
template <class T>
__device__ inline T row_sum(T value) {
  for (int offset = 8; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

template <class T>
__device__ inline void clear(T (&acc)[kPerThread][kPerThread]) {
  #pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    #pragma unroll
    for (int c = 0; c < kPerThread; ++c) acc[r][c] = 0;
  }
}

// Scores of rows [row0, +64) against keys [key0, +64), scaled and masked: contracts over E,
// 64 dims at a time through the q and k tiles (unless `loaded`: E <= 64 and both tiles hold
// these rows and keys already).
template <class T, class C = compute_t<T>>
__device__ inline void tile_scores(C (&s)[kPerThread][kPerThread], C* q_tile, C* k_tile, bool loaded,
                                   const AttentionLayout& layout, const AttentionPointers<T>& args, int64_t n,
                                   int64_t row0, int64_t key0, int ty, int tx) {
  clear(s);
  if (loaded) {
    product_nt(s, q_tile, k_tile, ty, tx);
  } else {
    for (int64_t d0 = 0; d0 < layout.embed; d0 += kTile) {
      load_tile(q_tile, args.q, layout, kAttentionQ, n, row0, layout.target_length, d0, layout.embed);
      load_tile(k_tile, args.k, layout, kAttentionK, n, key0, layout.source_length, d0, layout.embed);
      __syncthreads();
      product_nt(s, q_tile, k_tile, ty, tx);
      __syncthreads();
    }
  }
  #pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    #pragma unroll
    for (int c = 0; c < kPerThread; ++c) s[r][c] = masked_score(layout, args, n, row0 + ty + 16 * r, key0 + tx + 16 * c, s[r][c]);
  }
}

// Grid: (query tiles, matrices, 64-column chunks of Ev). Shared memory: q, k and weights tiles;
// the k tile takes v once the scores are done.
template <class T>
__global__ void __launch_bounds__(kThreads) attention_forward(AttentionLayout layout, AttentionPointers<T> args) {
  using C = compute_t<T>;
  C *const q_tile = shared_tile<C>(0), *const kv_tile = shared_tile<C>(1), *const weights_tile = shared_tile<C>(2);
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int64_t L = layout.target_length, S = layout.source_length, E = layout.embed, Ev = layout.value_embed;
  const int64_t row0 = int64_t(blockIdx.x) * kTile;
  const WeightsDropout<T> dropout(args);
  // A causal row i sees keys j <= i: this tile's rows see none past row0 + 63.
  const int64_t key_end = args.is_causal && row0 + kTile < S ? row0 + kTile : S;
  const bool q_resident = E <= kTile;
  // Chunks of 64 output columns along z, looping past gridDim.z's limit as matrices do along y.
  const int64_t col_end = Ev > 0 ? Ev : 1;

  for (int64_t col0 = int64_t(blockIdx.z) * kTile; col0 < col_end; col0 += int64_t(gridDim.z) * kTile)
  for (int64_t n = blockIdx.y; n < layout.matrices; n += gridDim.y) {
    C running_max[kPerThread], running_sum[kPerThread], acc[kPerThread][kPerThread];
    #pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      running_max[r] = minus_infinity<C>();
      running_sum[r] = 0;
    }
    clear(acc);
    if (q_resident) load_tile(q_tile, args.q, layout, kAttentionQ, n, row0, L, 0, E);
    for (int64_t key0 = 0; key0 < key_end; key0 += kTile) {
      if (q_resident) {
        load_tile(kv_tile, args.k, layout, kAttentionK, n, key0, S, 0, E);
        __syncthreads();
      }
      C s[kPerThread][kPerThread];
      tile_scores(s, q_tile, kv_tile, q_resident, layout, args, n, row0, key0, ty, tx);
      #pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        C tile_max = s[r][0];
        #pragma unroll
        for (int c = 1; c < kPerThread; ++c) tile_max = fmax(tile_max, s[r][c]);
        const C new_max = fmax(running_max[r], row_max(tile_max));
        // A row with no key seen yet keeps max -inf: exponentiate against 0 so that its masked
        // scores give exp(-inf) = 0, not exp(-inf - -inf) = NaN.
        const C base = new_max == minus_infinity<C>() ? C(0) : new_max;
        const C rescale = exp(running_max[r] - base);
        C tile_sum = 0;
        const int64_t i = row0 + ty + 16 * r;
        #pragma unroll
        for (int c = 0; c < kPerThread; ++c) {
          const C e = exp(s[r][c] - base);
          tile_sum += e;
          const int64_t j = key0 + tx + 16 * c;
          const C factor = i < L && j < S ? dropout.factor(layout, n, i, j) : C(1);
          s[r][c] = e * factor;
        }
        running_sum[r] = running_sum[r] * rescale + row_sum(tile_sum);
        running_max[r] = new_max;
        #pragma unroll
        for (int c = 0; c < kPerThread; ++c) acc[r][c] *= rescale;
      }
      __syncthreads();  // every thread is done with the k tile
      #pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        #pragma unroll
        for (int c = 0; c < kPerThread; ++c) weights_tile[(ty + 16 * r) * kPitch + tx + 16 * c] = s[r][c];
      }
      load_tile(kv_tile, args.v, layout, kAttentionV, n, key0, S, col0, Ev);
      __syncthreads();
      product_nn(acc, weights_tile, kv_tile, ty, tx);
      __syncthreads();  // before the next tile overwrites k and the weights
    }
    #pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int64_t i = row0 + ty + 16 * r;
      if (i >= L) continue;
      // A row that saw no key (all masked) attends to nothing: out 0, and lse +inf so that the
      // backward's exp(S - lse) gives it zero weights and zero gradients, as on the CPU.
      const bool attended = running_sum[r] > C(0);
      #pragma unroll
      for (int c = 0; c < kPerThread; ++c) {
        const int64_t col = col0 + tx + 16 * c;
        const C value = attended ? acc[r][c] / running_sum[r] : C(0);
        if (col < Ev) args.out[layout.offset(kAttentionOut, n, i, col)] = round_to<T>(value);
      }
      if (col0 == 0 && tx == 0) {
        args.log_sum_exp[n * L + i] = attended ? running_max[r] + log(running_sum[r]) : -minus_infinity<C>();
      }
    }
  }
}

// D = rowsum(grad_out * out), one warp per row.
template <class T>
__global__ void out_dot_grad_rows(AttentionLayout layout, AttentionPointers<T> args) {
  const int64_t rows = layout.matrices * layout.target_length;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t n = row / layout.target_length, i = row % layout.target_length;
    compute_t<T> sum = 0;
    for (int64_t col = lane; col < layout.value_embed; col += 32) {
      sum += to_compute(args.grad_out[layout.offset(kAttentionGradOut, n, i, col)]) *
             to_compute(args.out[layout.offset(kAttentionOut, n, i, col)]);
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) args.out_dot_grad[row] = sum;
  }
}

// Grid: (key tiles, matrices, 64-column chunks of max(E, Ev)). Shared memory: tiles of q, k,
// grad_out, v, the weights W and the scores' gradient dS. Five 4 x 4 accumulators per thread
// need more than 128 registers: one block per SM lets ptxas keep them all (no spills in float).
template <class T>
__global__ void __launch_bounds__(kThreads, 1) attention_backward(AttentionLayout layout, AttentionPointers<T> args) {
  using C = compute_t<T>;
  C *const q_tile = shared_tile<C>(0), *const k_tile = shared_tile<C>(1), *const grad_out_tile = shared_tile<C>(2);
  C *const v_tile = shared_tile<C>(3), *const weights_tile = shared_tile<C>(4), *const grad_scores_tile = shared_tile<C>(5);
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int64_t L = layout.target_length, S = layout.source_length, E = layout.embed, Ev = layout.value_embed;
  const int64_t key0 = int64_t(blockIdx.x) * kTile;
  const WeightsDropout<T> dropout(args);
  const bool need_scores = args.grad_q != nullptr || args.grad_k != nullptr;
  // Chunks of 64 columns of the widest head dim along z, looping past gridDim.z's limit.
  const int64_t widest = E > Ev ? E : Ev;
  const int64_t col_end = widest > 0 ? widest : 1;
  // With E, Ev <= 64 the k and v tiles hold this block's keys for good, and the q and grad_out
  // tiles, once loaded for a query tile, are also the ones the gradients' products need.
  const bool resident = E <= kTile && Ev <= kTile;
  // A causal key j is seen by queries i >= j only.
  const int64_t query_begin = args.is_causal ? key0 : 0;

  for (int64_t col0 = int64_t(blockIdx.z) * kTile; col0 < col_end; col0 += int64_t(gridDim.z) * kTile)
  for (int64_t n = blockIdx.y; n < layout.matrices; n += gridDim.y) {
    C grad_k[kPerThread][kPerThread], grad_v[kPerThread][kPerThread];
    clear(grad_k);
    clear(grad_v);
    if (resident) {
      load_tile(k_tile, args.k, layout, kAttentionK, n, key0, S, 0, E);
      load_tile(v_tile, args.v, layout, kAttentionV, n, key0, S, 0, Ev);
    }
    for (int64_t row0 = query_begin; row0 < L; row0 += kTile) {
      if (resident) {
        load_tile(q_tile, args.q, layout, kAttentionQ, n, row0, L, 0, E);
        load_tile(grad_out_tile, args.grad_out, layout, kAttentionGradOut, n, row0, L, 0, Ev);
        __syncthreads();
      }
      C p[kPerThread][kPerThread];
      tile_scores(p, q_tile, k_tile, resident, layout, args, n, row0, key0, ty, tx);
      // dP = grad_out v^T, contracted over Ev.
      C grad_p[kPerThread][kPerThread];
      clear(grad_p);
      if (need_scores) {
        if (resident) {
          product_nt(grad_p, grad_out_tile, v_tile, ty, tx);
        } else {
          for (int64_t d0 = 0; d0 < Ev; d0 += kTile) {
            load_tile(grad_out_tile, args.grad_out, layout, kAttentionGradOut, n, row0, L, d0, Ev);
            load_tile(v_tile, args.v, layout, kAttentionV, n, key0, S, d0, Ev);
            __syncthreads();
            product_nt(grad_p, grad_out_tile, v_tile, ty, tx);
            __syncthreads();
          }
        }
      }
      #pragma unroll
      for (int r = 0; r < kPerThread; ++r) {
        const int64_t i = row0 + ty + 16 * r;
        const C lse = i < L ? args.log_sum_exp[n * L + i] : C(0);
        const C row_term = i < L && need_scores ? args.out_dot_grad[n * L + i] : C(0);
        #pragma unroll
        for (int c = 0; c < kPerThread; ++c) {
          const int64_t j = key0 + tx + 16 * c;
          if (i >= L || j >= S) {  // past the lengths: no weight, no gradient
            weights_tile[(ty + 16 * r) * kPitch + tx + 16 * c] = 0;
            grad_scores_tile[(ty + 16 * r) * kPitch + tx + 16 * c] = 0;
            continue;
          }
          // A row with no key has lse +inf: exp(S - lse) = 0, zero weights, as on the CPU.
          const C probability = exp(p[r][c] - lse);
          const C factor = dropout.factor(layout, n, i, j);
          C grad_score = probability * (grad_p[r][c] * factor - row_term);
          if (is_masked_out(layout, args, n, i, j)) grad_score = 0;  // masked_fill's backward
          weights_tile[(ty + 16 * r) * kPitch + tx + 16 * c] = probability * factor;
          grad_scores_tile[(ty + 16 * r) * kPitch + tx + 16 * c] = grad_score;
        }
      }
      if (!resident) {
        __syncthreads();  // the products below read chunk col0 of q, k and grad_out
        load_tile(q_tile, args.q, layout, kAttentionQ, n, row0, L, col0, E);
        load_tile(k_tile, args.k, layout, kAttentionK, n, key0, S, col0, E);
        load_tile(grad_out_tile, args.grad_out, layout, kAttentionGradOut, n, row0, L, col0, Ev);
      }
      __syncthreads();
      // Rows of grad_k and grad_v are this block's keys ty + 16r; columns are col0 + tx + 16c.
      if (args.grad_v != nullptr && col0 < Ev) product_tn(grad_v, weights_tile, grad_out_tile, ty, tx);
      if (args.grad_k != nullptr && col0 < E) product_tn(grad_k, grad_scores_tile, q_tile, ty, tx);
      if (args.grad_q != nullptr && col0 < E) {
        C grad_q[kPerThread][kPerThread];
        clear(grad_q);
        product_nn(grad_q, grad_scores_tile, k_tile, ty, tx);
        #pragma unroll
        for (int r = 0; r < kPerThread; ++r) {
          const int64_t i = row0 + ty + 16 * r;
          if (i >= L) continue;
          #pragma unroll
          for (int c = 0; c < kPerThread; ++c) {
            const int64_t col = col0 + tx + 16 * c;
            if (col < E) atomicAdd(args.grad_q + layout.offset(kAttentionGradQ, n, i, col), args.scale * grad_q[r][c]);
          }
        }
      }
      __syncthreads();  // before the next query tile overwrites the tiles
    }
    #pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int64_t j = key0 + ty + 16 * r;
      if (j >= S) continue;
      #pragma unroll
      for (int c = 0; c < kPerThread; ++c) {
        const int64_t col = col0 + tx + 16 * c;
        if (args.grad_v != nullptr && col < Ev) {
          args.grad_v[layout.offset(kAttentionGradV, n, j, col)] = round_to<T>(grad_v[r][c]);
        }
        if (args.grad_k != nullptr && col < E) {
          args.grad_k[layout.offset(kAttentionGradK, n, j, col)] = round_to<T>(args.scale * grad_k[r][c]);
        }
      }
    }
    __syncthreads();  // before the next matrix reloads the k and v tiles
  }
}

// The current device's compute capability and opt-in shared memory per block, asked of the
// runtime once per device.
TensorCoreDevice current_tensor_core_device() {
  constexpr int kCachedDevices = 64;
  static std::atomic<int> capabilities[kCachedDevices];        // 0: not asked yet
  static std::atomic<int64_t> shared_memory[kCachedDevices];
  int device = 0;
  check(cudaGetDevice(&device), "attention");
  if (device < 0 || device >= kCachedDevices) return {};
  if (capabilities[device].load() == 0) {
    int major = 0, minor = 0, shared = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "attention");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "attention");
    check(cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "attention");
    shared_memory[device].store(shared);
    capabilities[device].store(major * 10 + minor);
  }
  return {capabilities[device].load(), shared_memory[device].load()};
}

constexpr int64_t kMaxGridZ = 65535;
std::atomic<int64_t> column_block_limit{kMaxGridZ};

std::atomic<bool>& tensor_cores_setting() {
  static std::atomic<bool> allowed(tensor_cores_allowed_by(std::getenv("EMBER_ATTENTION_TENSOR_CORES")));
  return allowed;
}

template <class T>
bool takes_tensor_cores(const AttentionLayout& layout) {
  if constexpr (is_16_bit_element<T>) {
    return attention_uses_tensor_cores(true, layout.embed, layout.value_embed, current_tensor_core_device(),
                                       attention_tensor_cores_allowed());
  } else {
    return false;
  }
}

// The element types the mma.sync kernels are built for: bf16 and f16, and float32 on TF32 (taken
// only while allow_tf32(), as cuBLAS's float32 products are).
template <class T>
inline constexpr bool kHasFlashKernels = kFlashKernelsCompiled && (is_16_bit_element<T> || std::is_same_v<T, float>);

template <class T>
int flash_element_bytes_now() {
  return flash_element_bytes(int(sizeof(T)), is_16_bit_element<T>, allow_tf32());
}

// Whether the mma.sync forward takes this call: the rule of cuda/attention/flash_attention_plan.h
// for the tile shape chosen now.
template <class T>
bool takes_flash_forward(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if constexpr (kHasFlashKernels<T>) {
    const TensorCoreDevice device = current_tensor_core_device();
    const int head_dim = flash_head_dim(layout.embed, layout.value_embed);
    const FlashTile tile = flash_forward_tiles(head_dim, int(sizeof(T)))[flash_forward_tile_choice()];
    const FlashOperands operands{reinterpret_cast<uintptr_t>(args.q), reinterpret_cast<uintptr_t>(args.k),
                                 reinterpret_cast<uintptr_t>(args.v)};
    return attention_uses_flash_forward(flash_element_bytes_now<T>(), layout, operands, device.compute_capability,
                                        device.shared_memory_per_block, tile, attention_flash_allowed());
  } else {
    return false;
  }
}

// Whether the mma.sync backward takes this call (the rule for its tile shape chosen now).
template <class T>
bool takes_flash_backward(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if constexpr (kHasFlashKernels<T>) {
    const TensorCoreDevice device = current_tensor_core_device();
    const int head_dim = flash_head_dim(layout.embed, layout.value_embed);
    const FlashTile tile = flash_backward_tiles(head_dim)[flash_backward_tile_choice()];
    const FlashOperands operands{reinterpret_cast<uintptr_t>(args.q), reinterpret_cast<uintptr_t>(args.k),
                                 reinterpret_cast<uintptr_t>(args.v), reinterpret_cast<uintptr_t>(args.grad_out)};
    return attention_uses_flash_backward(flash_element_bytes_now<T>(), layout, operands, device.compute_capability,
                                         device.shared_memory_per_block, tile, attention_flash_allowed(),
                                         attention_deterministic());
  } else {
    return false;
  }
}

}  // namespace

void set_attention_column_block_limit(int64_t limit) {
  column_block_limit.store(limit < 1 ? 1 : (limit > kMaxGridZ ? kMaxGridZ : limit));
}

bool attention_tensor_cores_allowed() { return tensor_cores_setting().load(); }
void set_attention_tensor_cores_allowed(bool allowed) { tensor_cores_setting().store(allowed); }

template <class T>
void launch_attention_forward(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (layout.matrices == 0 || layout.target_length == 0) return;
  if (takes_flash_forward<T>(layout, args)) {
    if constexpr (kHasFlashKernels<T>) launch_attention_forward_flash(layout, args);
    return;
  }
  if (takes_tensor_cores<T>(layout)) {
    if constexpr (is_16_bit_element<T>) launch_attention_forward_tensor_cores(layout, args);
    return;
  }
  const size_t shared = 3 * kTileElements * sizeof(compute_t<T>);
  allow_shared_memory(attention_forward<T>, shared, "attention");
  const dim3 grid(attention_tiles(layout.target_length), attention_matrix_blocks(layout.matrices),
                  attention_column_blocks(layout.value_embed > 0 ? layout.value_embed : 1, column_block_limit.load()));
  attention_forward<T><<<grid, kThreads, shared, current_stream()>>>(layout, args);
  check_launch("attention");
}

template <class T>
void launch_attention_backward(const AttentionLayout& layout, const AttentionPointers<T>& args) {
  if (layout.matrices == 0 || layout.source_length == 0) return;
  if (args.grad_q != nullptr || args.grad_k != nullptr) {
    const int64_t rows = layout.matrices * layout.target_length;
    const int64_t blocks = (rows + kThreads / 32 - 1) / (kThreads / 32);
    out_dot_grad_rows<T><<<static_cast<unsigned int>(blocks < 132 * 32 ? blocks : 132 * 32), kThreads, 0,
                           current_stream()>>>(layout, args);
    check_launch("attention_backward");
  }
  if (takes_flash_backward<T>(layout, args)) {
    if constexpr (kHasFlashKernels<T>) launch_attention_backward_flash(layout, args);
    return;
  }
  if (takes_tensor_cores<T>(layout)) {
    if constexpr (is_16_bit_element<T>) launch_attention_backward_tensor_cores(layout, args);
    return;
  }
  const size_t shared = 6 * kTileElements * sizeof(compute_t<T>);
  allow_shared_memory(attention_backward<T>, shared, "attention_backward");
  const int64_t widest = layout.embed > layout.value_embed ? layout.embed : layout.value_embed;
  const dim3 grid(attention_tiles(layout.source_length), attention_matrix_blocks(layout.matrices),
                  attention_column_blocks(widest > 0 ? widest : 1, column_block_limit.load()));
  attention_backward<T><<<grid, kThreads, shared, current_stream()>>>(layout, args);
  check_launch("attention_backward");
}

#define EMBER_INSTANTIATE(T)                                                                          \
  template void launch_attention_forward<T>(const AttentionLayout&, const AttentionPointers<T>&); \
  template void launch_attention_backward<T>(const AttentionLayout&, const AttentionPointers<T>&);
EMBER_FOR_EACH_FLOATING_ELEMENT(EMBER_INSTANTIATE)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
