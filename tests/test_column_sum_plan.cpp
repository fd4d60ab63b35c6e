// How the CUDA layer_norm backward splits its sums over rows (cuda/common/column_sum_plan.h), checked on
// the CPU: the slices must cover every row exactly once, in order, none empty, and the split must
// fill the GPU without cutting slices shorter than the plan allows. The kernels walk the very
// same split_begin/split_end, so what is proved here is what the GPU sums.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "cuda/common/column_sum_plan.h"

namespace {

using ember::cuda::ColumnSumPlan;
using ember::cuda::kMaxSplits;
using ember::cuda::kMinRowsPerSplit;
using ember::cuda::kSumBlocksWanted;
using ember::cuda::plan_column_sums;

// Every row in exactly one slice, the slices in order and none empty.
void check_slices_cover_rows(const ColumnSumPlan& plan) {
  INFO("rows " << plan.rows << ", columns " << plan.columns << ", splits " << plan.splits);
  REQUIRE(plan.splits >= 1);
  int64_t next = 0;
  for (int64_t split = 0; split < plan.splits; ++split) {
    CHECK(plan.split_begin(split) == next);
    CHECK(plan.split_end(split) > plan.split_begin(split));
    next = plan.split_end(split);
  }
  CHECK(next == plan.rows);
  // A slice past the last is empty, never past the rows.
  CHECK(plan.split_begin(plan.splits) == plan.rows);
  CHECK(plan.split_end(plan.splits) == plan.rows);
}

}  // namespace

TEST_CASE("a training step's layer_norm is split to fill the GPU") {
  // The classifier at batch 128: 16,384 rows of width 256, 8 groups of 32 columns.
  const ColumnSumPlan plan = plan_column_sums(16384, 256);
  CHECK(plan.column_groups == 8);
  CHECK(plan.splits == 66);
  CHECK(plan.rows_per_split == 249);
  CHECK(plan.column_groups * plan.splits >= kSumBlocksWanted);
  CHECK(plan.partials_per_sum() == 66 * 256);
  check_slices_cover_rows(plan);
}

TEST_CASE("rows are split only as far as slices stay long enough") {
  // 5 rows: one slice, whatever the width.
  CHECK(plan_column_sums(5, 1000).splits == 1);
  CHECK(plan_column_sums(5, 1000).column_groups == 32);
  // 700 rows: at most 700 / 64 = 10 slices, of 70 rows.
  const ColumnSumPlan seven_hundred = plan_column_sums(700, 33);
  CHECK(seven_hundred.splits == 10);
  CHECK(seven_hundred.rows_per_split == 70);
  // 5000 rows in one group: 78 wanted by length, but slices of 65 rows need only 77 of them.
  const ColumnSumPlan recounted = plan_column_sums(5000, 16);
  CHECK(recounted.rows_per_split == 65);
  CHECK(recounted.splits == 77);
  // Wide rows already fill the GPU with their column groups: no split.
  CHECK(plan_column_sums(100000, 32 * kSumBlocksWanted).splits == 1);
}

TEST_CASE("the slices cover every row once, for any shape") {
  for (const int64_t rows : {1, 2, 63, 64, 65, 127, 128, 129, 1000, 4097, 16384, 65537, 1000003}) {
    for (const int64_t columns : {1, 31, 32, 33, 96, 256, 768, 4096, 70000}) {
      const ColumnSumPlan plan = plan_column_sums(rows, columns);
      check_slices_cover_rows(plan);
      CHECK(plan.splits <= kMaxSplits);
      CHECK(plan.column_groups == (columns + 31) / 32);
      if (plan.splits > 1) CHECK(plan.rows_per_split >= kMinRowsPerSplit);
      CHECK(plan.partials_per_sum() == plan.splits * columns);
    }
  }
}

TEST_CASE("no rows or no columns: nothing to split") {
  const ColumnSumPlan no_rows = plan_column_sums(0, 8);
  CHECK(no_rows.splits == 1);
  CHECK(no_rows.split_begin(0) == 0);
  CHECK(no_rows.split_end(0) == 0);
  const ColumnSumPlan no_columns = plan_column_sums(8, 0);
  CHECK(no_columns.splits == 1);
  CHECK(no_columns.column_groups == 0);
  CHECK(no_columns.partials_per_sum() == 0);
}
