// The loops the CPU reduction kernels share (core/ops/reduce_*.cpp): the accumulator type of a
// running total, the two walks of a [outer, reduce, inner] layout, and the extremum of a row.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/cpu/reduction_layout.h"
#include "core/cpu/wrapping.h"
#include "core/dtype.h"
#include "core/ops/op_codes.h"
#include "core/parallel.h"

namespace ember::cpu {

// Each kernel has two shapes of loop. With inner == 1 every output reduces one contiguous row
// (a vectorised reduction, rows split over threads). Otherwise an output column (o, i) steps
// through the rows r with stride `inner`, so the kernel works on a block of neighbouring
// columns at once and the loop over the block is the unit-stride, vectorised one.

// Float32 sums accumulate in double, so long rows and columns keep their precision: a float32
// running total of n terms drifts by up to about n * 2^-24 of it. The 16-bit formats compute in
// float and accumulate in double as float32 does, so their one rounding is that of the result.
// int64 totals accumulate in uint64, so a sum past int64's range wraps around as PyTorch's does
// (cpu/wrapping.h) where an int64 total would be undefined behaviour.
template <class T>
using Accumulator = std::conditional_t<std::is_same_v<compute_type<T>, float>, double, wrapping_t<T>>;

// Kernels that need scratch per column work on tiles of this many columns.
inline constexpr int64_t kColumnTile = 64;
// A sum's tiles are wider: its scratch is one running total a column (8 KB of doubles, in L1), and
// a wide tile reads each row as one long contiguous run. With 64 columns a tile read 256 bytes
// from each of 4,096 rows 4 KB apart, a page each: the column sums of a [4096, 1024] float32
// gradient (a linear layer's bias) ran at about 8 GB/s on an AVX2 EPYC.
inline constexpr int64_t kSumColumnTile = 1024;

// Calls body(o, i0, i1) for blocks of at most Tile columns [i0, i1) of outer index o, covering
// every output once, split over threads by output element.
template <int64_t Tile = kColumnTile, class Body>
void parallel_over_columns(const ReductionLayout& layout, Body&& body) {
  const int64_t inner = layout.inner;
  parallel_for(layout.outer * inner, layout.reduce, [&](int64_t begin, int64_t end) {
    for (int64_t flat = begin; flat < end;) {
      const int64_t o = flat / inner, i0 = flat % inner;
      const int64_t i1 = std::min(inner, i0 + (end - flat));
      for (int64_t t0 = i0; t0 < i1; t0 += Tile) body(o, t0, std::min(i1, t0 + Tile));
      flat += i1 - i0;
    }
  });
}

// Calls body(o, row) for each contiguous row of an inner == 1 layout, split over threads.
template <class T, class Body>
void parallel_over_rows(const ReductionLayout& layout, Body&& body) {
  const T* in = layout.source.data_ptr<T>();
  const int64_t reduce = layout.reduce;
  parallel_for(layout.outer, reduce, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) body(o, in + o * reduce);
  });
}

// Comparisons below take compute_type values: a 16-bit element is compared as the float it
// converts to exactly.
template <class C>
bool is_nan(C value) {
  if constexpr (std::is_floating_point_v<C>) return value != value;
  else return false;
}

template <Extremum which, class C>
bool beats(C candidate, C best) {
  if constexpr (which == Extremum::Max) return candidate > best;
  else return candidate < best;
}

// The largest (smallest) element of a contiguous row of n >= 1 elements, NaN if it holds one,
// as a compute_type value (exactly an element of the row, or NaN).
template <Extremum which, class T>
compute_type<T> row_extremum(const T* row, int64_t n) {
  using C = compute_type<T>;
  C best = row[0];
  int nan_seen = 0;
  if constexpr (which == Extremum::Max) {
#pragma omp simd reduction(max : best) reduction(| : nan_seen)
    for (int64_t r = 0; r < n; ++r) {
      const C v = row[r];
      best = v > best ? v : best;
      nan_seen |= is_nan(v);
    }
  } else {
#pragma omp simd reduction(min : best) reduction(| : nan_seen)
    for (int64_t r = 0; r < n; ++r) {
      const C v = row[r];
      best = v < best ? v : best;
      nan_seen |= is_nan(v);
    }
  }
  if constexpr (std::is_floating_point_v<C>) {
    if (nan_seen) return std::numeric_limits<C>::quiet_NaN();
  }
  return best;
}

// Folds row r into running extrema of a column block; once a column holds NaN it keeps it.
template <Extremum which, class T>
void fold_extremum(T* best, const T* row, int64_t count) {
  using C = compute_type<T>;
#pragma omp simd
  for (int64_t k = 0; k < count; ++k) {
    const C v = row[k];
    best[k] = (beats<which, C>(v, best[k]) || is_nan(v)) ? row[k] : best[k];
  }
}

}  // namespace ember::cpu
