// How a batch of matrix products reaches cuBLAS in one call, whatever its layout.
//
// A product's batch is described, for each of its three operands (a, b and the output c), by
// the element offset of every matrix: offset(i) = sum over the batch dims d of index_d(i) *
// stride_d, with i counted row-major over the batch. cuBLAS takes a batch in one call in two
// forms:
//   - strided-batched: matrix i at base + i * s, one stride s per operand (0 = broadcast);
//   - batched: arrays of pointers, one per matrix, which must be in device memory.
// plan_gemm_batch() merges the batch dims that can be merged: adjacent dims d, d + 1 whose
// strides satisfy stride_d == stride_{d+1} * size_{d+1} for all three operands at once walk
// memory as one dim would, and size-1 dims do not move anything. If one dim is left (or none),
// the batch is strided-batched. Otherwise (heads split off a projection as a view: q [B, H, L,
// E] with batch strides (L * 3d, E) do not merge) a kernel computes the pointer arrays on the
// device from the bases and the merged layout, so the call needs no host-to-device copy, no
// host wait, and can be recorded in a CUDA graph. Either way it is one cuBLAS call.
//
// Plain C++, fmt-free, with the offset arithmetic callable from device code: the kernel that
// fills the pointer arrays (gemm_pointers.cu) and the CPU test (tests/test_gemm_batch_plan.cpp)
// run the very same function.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define EMBER_GEMM_HOST_DEVICE __host__ __device__
#else
#define EMBER_GEMM_HOST_DEVICE
#endif

namespace ember::cuda {

// Batch dims left after merging are at most the tensor's batch dims; this bounds the layout
// passed by value to the pointer kernel. Tensors of more dims than this do not merge to more
// than this unless their batch has that many non-mergeable dims, which plan_gemm_batch reports.
inline constexpr int kMaxGemmBatchDims = 12;

enum GemmOperand : int { kOperandA = 0, kOperandB = 1, kOperandC = 2 };

struct GemmBatchLayout {
  int dims = 0;                                  // batch dims after merging (0: a single product)
  int64_t sizes[kMaxGemmBatchDims] = {};         // row-major, outermost first
  int64_t strides[3][kMaxGemmBatchDims] = {};    // [operand][dim], in elements
  int64_t count = 1;                             // matrices in the batch: the product of sizes

  // Element offset of matrix `index` (row-major over the merged dims) of `operand`.
  EMBER_GEMM_HOST_DEVICE int64_t offset(int operand, int64_t index) const {
    int64_t offset = 0;
    for (int d = dims - 1; d >= 0; --d) {
      offset += (index % sizes[d]) * strides[operand][d];
      index /= sizes[d];
    }
    return offset;
  }

  // Whether one stride per operand reaches every matrix: cuBLAS's strided-batched form.
  bool is_strided() const { return dims <= 1; }
  // That stride (0 for a single matrix or an operand broadcast over the batch).
  int64_t batch_stride(int operand) const { return dims == 0 ? 0 : strides[operand][0]; }
};

// Whether every matrix of `operand` starts at a multiple of `alignment` bytes, given the address
// of its first matrix: cuBLAS's 16-bit batched products over pointer arrays need each pointer
// 16-byte aligned, and cannot see the pointers themselves, which live in device memory. The
// offsets are sums of multiples of the merged strides, every merged dim moves (size > 1), and
// the matrix one step along dim d alone sits one stride away; so all are aligned exactly when
// the base and every stride (in bytes) are.
inline bool batch_pointers_aligned(const GemmBatchLayout& layout, int operand, uint64_t base_address,
                                   int64_t element_bytes, int64_t alignment) {
  if (base_address % static_cast<uint64_t>(alignment) != 0) return false;
  for (int d = 0; d < layout.dims; ++d) {
    if ((layout.strides[operand][d] * element_bytes) % alignment != 0) return false;
  }
  return true;
}

// The merged layout of a batch of `rank` dims (sizes, and each operand's strides over them), or
// dims == -1 when more than kMaxGemmBatchDims dims remain after merging.
inline GemmBatchLayout plan_gemm_batch(int rank, const int64_t* sizes, const int64_t* strides_a,
                                       const int64_t* strides_b, const int64_t* strides_c) {
  const int64_t* const strides[3] = {strides_a, strides_b, strides_c};
  GemmBatchLayout layout;
  for (int d = 0; d < rank; ++d) {
    layout.count *= sizes[d];
    if (sizes[d] == 1) continue;  // index 0 only: its strides never matter
    if (layout.dims > 0) {
      // Merge into the previous kept dim when stepping it equals stepping this one size times.
      const int last = layout.dims - 1;
      bool mergeable = true;
      for (int o = 0; o < 3; ++o) mergeable = mergeable && layout.strides[o][last] == strides[o][d] * sizes[d];
      if (mergeable) {
        layout.sizes[last] *= sizes[d];
        for (int o = 0; o < 3; ++o) layout.strides[o][last] = strides[o][d];
        continue;
      }
    }
    if (layout.dims == kMaxGemmBatchDims) {
      layout.dims = -1;
      return layout;
    }
    layout.sizes[layout.dims] = sizes[d];
    for (int o = 0; o < 3; ++o) layout.strides[o][layout.dims] = strides[o][d];
    ++layout.dims;
  }
  if (layout.count == 0) layout.dims = 0;  // an empty batch: nothing to call
  return layout;
}

}  // namespace ember::cuda
