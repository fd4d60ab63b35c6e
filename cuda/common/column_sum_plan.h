// How the CUDA layer_norm backward sums a [rows, columns] matrix over its rows (grad_weight and
// grad_bias), split over enough blocks to fill the GPU.
//
// A block owns 32 adjacent columns, so its reads stay coalesced. With one block per group of
// columns, a layer of width 256 would run on 8 blocks of a GPU that has 132 multiprocessors,
// each block walking every row: a training step of 16,384 rows spent half a millisecond per
// call there. So the rows are cut into `splits` slices too, one block per (column group,
// slice): each block writes its partial sums to scratch, and a second kernel adds each column's
// partials in slice order. The order of every addition is fixed by the plan, never by the
// scheduling, so the result is the same bit for bit from run to run (no atomics).
//
// Plain C++: the kernels (cuda/ops/layer_norm.cu) and the CPU test (tests/test_column_sum_plan.cpp)
// use the very same functions.
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef __CUDACC__
#define EMBER_PLAN_HOST_DEVICE __host__ __device__
#else
#define EMBER_PLAN_HOST_DEVICE
#endif

namespace ember::cuda {

inline constexpr int64_t kColumnsPerGroup = 32;  // one warp's width of columns per block
inline constexpr int64_t kSumBlocksWanted = 132 * 4;  // about four blocks per multiprocessor of an H100
inline constexpr int64_t kMinRowsPerSplit = 64;  // below this, a block's setup outweighs its rows
inline constexpr int64_t kMaxSplits = 1024;  // bounds the scratch and the second kernel's loop

struct ColumnSumPlan {
  int64_t rows = 0, columns = 0;
  int64_t column_groups = 0;  // ceil(columns / kColumnsPerGroup)
  int64_t splits = 1;         // slices of the rows, one block each per column group
  int64_t rows_per_split = 0; // every slice's length but perhaps the last's

  // The rows [begin, end) of slice `split`; empty for a slice past the last row.
  EMBER_PLAN_HOST_DEVICE int64_t split_begin(int64_t split) const {
    const int64_t begin = split * rows_per_split;
    return begin < rows ? begin : rows;
  }
  EMBER_PLAN_HOST_DEVICE int64_t split_end(int64_t split) const {
    const int64_t end = (split + 1) * rows_per_split;
    return end < rows ? end : rows;
  }
  // Elements of scratch per summed quantity: one partial per (slice, column), slice-major, so a
  // warp reading one slice's partials of 32 columns reads adjacent elements.
  int64_t partials_per_sum() const { return splits * columns; }
};

// Splits the rows only as far as needed to bring the blocks to about kSumBlocksWanted, keeping
// at least kMinRowsPerSplit rows per slice.
inline ColumnSumPlan plan_column_sums(int64_t rows, int64_t columns) {
  ColumnSumPlan plan;
  plan.rows = rows;
  plan.columns = columns;
  plan.column_groups = (columns + kColumnsPerGroup - 1) / kColumnsPerGroup;
  if (rows <= 0 || columns <= 0) {
    plan.rows_per_split = rows > 0 ? rows : 0;
    return plan;
  }
  const int64_t wanted = (kSumBlocksWanted + plan.column_groups - 1) / plan.column_groups;
  const int64_t most_by_length = std::max<int64_t>(1, rows / kMinRowsPerSplit);
  const int64_t splits = std::clamp<int64_t>(std::min(wanted, most_by_length), 1, kMaxSplits);
  plan.rows_per_split = (rows + splits - 1) / splits;
  // Rounding the length up can leave the last slices empty: count only the slices that hold rows.
  plan.splits = (rows + plan.rows_per_split - 1) / plan.rows_per_split;
  return plan;
}

}  // namespace ember::cuda

#undef EMBER_PLAN_HOST_DEVICE
