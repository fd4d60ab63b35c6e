// The device side of the reductions (cuda/ops/reduce.cu). Every one reduces a contiguous input seen
// as [outer, reduce, inner]: out[o * inner + i] combines x[(o * reduce + r) * inner + i] over r
// (core/cpu/reduction_layout.h brings any reduction to that form, on either device). fmt-free.
//
// When the outputs are few and each reduces many elements, every output's range is split over
// several blocks whose partial results meet in device scratch: the caller allocates
// reduce_scratch_bytes(outer, reduce, inner) bytes (8-byte aligned, from the caching allocator)
// and passes them as `scratch`, which may be null when that size is 0.
#pragma once

#include <cstdint>

#include "core/ops/op_codes.h"
#include "cuda/common/column_sum_plan.h"

namespace ember::cuda {

// The scratch bytes a reduction of this shape needs: 0 unless it is split.
int64_t reduce_scratch_bytes(int64_t outer, int64_t reduce, int64_t inner);

// Every launcher takes T = float, double, __nv_bfloat16 and __half (cuda/common/half_elements.h: read as
// float, the result rounded once on store); sum and the extrema also int64_t.
//
// float32 and the 16-bit formats accumulate in double, as on the CPU.
template <class T>
void launch_sum(const T* x, T* out, int64_t outer, int64_t reduce, int64_t inner, void* scratch);
// The sums down the columns of a [rows, columns] matrix (outer 1), for the floating types, by
// groups of 32 columns and slices of rows (cuda/common/column_sums.cuh): the reads coalesce whatever
// the width, where launch_sum's block per output strides down one column. rows >= 1; `scratch`:
// column_sum_scratch_elements(rows, columns) doubles.
template <class T>
void launch_column_sum(const T* x, T* out, int64_t rows, int64_t columns, double* scratch);
inline int64_t column_sum_scratch_elements(int64_t rows, int64_t columns) {
  return plan_column_sums(rows, columns).partials_per_sum();
}
// Two passes: the mean, then the squared deviations from it, divided by max(reduce -
// correction, 0).
template <class T>
void launch_variance(const T* x, T* out, int64_t outer, int64_t reduce, int64_t inner, int64_t correction,
                     void* scratch);
// log(sum(exp(x))) with the max subtracted first (0 when the max is infinite); -inf when
// reduce is 0.
template <class T>
void launch_logsumexp(const T* x, T* out, int64_t outer, int64_t reduce, int64_t inner, void* scratch);
// The largest (smallest) element and the position r of its first occurrence; a NaN beats every
// number and the first NaN wins. values or indices may be null. reduce >= 1.
template <class T>
void launch_extremum(Extremum which, const T* x, T* values, int64_t* indices, int64_t outer, int64_t reduce,
                     int64_t inner, void* scratch);

}  // namespace ember::cuda
