// Sums over the rows of a [rows, columns] matrix, one or more per column, split over the GPU as
// cuda/common/column_sum_plan.h plans: a block owns 32 adjacent columns (a warp's reads coalesce) and
// one slice of the rows, which its 16 thread rows walk; its partial sums go to scratch, and a
// second kernel adds each column's partials in slice order. Every addition's order is fixed by
// the plan (no atomics), so the result is the same from run to run. Sums are kept in double.
//
// What is summed comes from a functor, values(row, column, out) filling out[0..kSums), so the
// same kernels give sum's column totals and layer_norm's grad_weight and grad_bias together.
//
// CUDA only (included by .cu files); fmt-free.
#pragma once

#include <cstdint>

#include "cuda/runtime/check.h"
#include "cuda/common/column_sum_plan.h"
#include "cuda/runtime/launch.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {

inline constexpr int kColumnSumLanes = 16;  // thread rows of a block, each walking every 16th row

// Partial sums of one slice of the rows for 32 columns: partials[(k * splits + split) * columns
// + column]. Launched with blockDim (kColumnsPerGroup, kColumnSumLanes), gridDim.y = splits;
// gridDim.x strides over the column groups.
template <int kSums, class Values>
__global__ void column_partials_kernel(Values values, ColumnSumPlan plan, double* partials) {
  __shared__ double lanes[kSums][kColumnSumLanes][kColumnsPerGroup];
  const int64_t n = plan.columns, split = blockIdx.y;
  const int64_t begin = plan.split_begin(split), end = plan.split_end(split);
  for (int64_t first = blockIdx.x * kColumnsPerGroup; first < n; first += int64_t(gridDim.x) * kColumnsPerGroup) {
    const int64_t column = first + threadIdx.x;
    double sums[kSums] = {};
    if (column < n) {
      for (int64_t row = begin + threadIdx.y; row < end; row += kColumnSumLanes) {
        double terms[kSums];
        values(row, column, terms);
        for (int k = 0; k < kSums; ++k) sums[k] += terms[k];
      }
    }
    for (int k = 0; k < kSums; ++k) lanes[k][threadIdx.y][threadIdx.x] = sums[k];
    __syncthreads();
    if (threadIdx.y == 0 && column < n) {
      for (int lane = 1; lane < kColumnSumLanes; ++lane) {
        for (int k = 0; k < kSums; ++k) sums[k] += lanes[k][lane][threadIdx.x];
      }
      for (int k = 0; k < kSums; ++k) partials[(k * plan.splits + split) * n + column] = sums[k];
    }
    __syncthreads();  // the lanes are rewritten by the next group of columns
  }
}

// Each column's partials added in slice order; store(column, totals) writes the results.
template <int kSums, class Store>
__global__ void column_totals_kernel(const double* partials, ColumnSumPlan plan, Store store) {
  const int64_t n = plan.columns;
  for (int64_t column = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; column < n;
       column += int64_t(gridDim.x) * blockDim.x) {
    double totals[kSums] = {};
    for (int64_t split = 0; split < plan.splits; ++split) {
      for (int k = 0; k < kSums; ++k) totals[k] += partials[(k * plan.splits + split) * n + column];
    }
    store(column, totals);
  }
}

// `scratch`: kSums * plan.partials_per_sum() doubles of device memory.
template <int kSums, class Values, class Store>
void launch_column_sums(const char* op, const ColumnSumPlan& plan, Values values, Store store, double* scratch) {
  if (plan.rows == 0 || plan.columns == 0) return;
  const dim3 threads(kColumnsPerGroup, kColumnSumLanes);
  const dim3 blocks(blocks_for(plan.columns, kColumnsPerGroup), static_cast<unsigned int>(plan.splits));
  column_partials_kernel<kSums><<<blocks, threads, 0, current_stream()>>>(values, plan, scratch);
  check_launch(op);
  column_totals_kernel<kSums><<<blocks_for(plan.columns), kThreadsPerBlock, 0, current_stream()>>>(scratch, plan,
                                                                                                   store);
  check_launch(op);
}

}  // namespace ember::cuda
