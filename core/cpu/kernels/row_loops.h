// Loops over one contiguous row for the row kernels (softmax, cross_entropy, logsumexp), compiled
// into each rung (core/cpu/kernels/rung_namespace.h).
// Each keeps its partial results per lane, in arrays one or four vector registers long that
// the compiler keeps in registers, so that
//   - a max or sum over a row from memory is not bound by the latency of one accumulator
//     (four independent vector accumulators), and
//   - a sum interleaved with software prefetches needs no horizontal reduction per block.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/cpu/kernels/rung_namespace.h"

namespace ember::cpu::EMBER_CPU_KERNELS {

// Elements of T in one cache line (and one 512-bit vector register).
template <class T>
inline constexpr int64_t kLineLanes = 64 / static_cast<int64_t>(sizeof(T));

// Folds lanes[0, count) (count a power of two) into lanes[0] with `combine`, halving the
// width each step: log2(count) dependent steps, each a vector operation, where a running
// scalar would be count dependent steps.
template <class T, class Combine>
inline T fold_lanes(T* lanes, int64_t count, Combine combine) {
  for (int64_t width = count / 2; width > 0; width /= 2) {
#pragma omp simd
    for (int64_t lane = 0; lane < width; ++lane) lanes[lane] = combine(lanes[lane], lanes[lane + width]);
  }
  return lanes[0];
}

template <class T>
inline T max_of(T a, T b) {
  return b > a ? b : a;
}
template <class T>
inline T sum_of(T a, T b) {
  return a + b;
}

// {max, sum} of x[0, n). NaN entries are ignored by the max (they reach the result through
// the sum, and through whatever the caller computes from x).
template <class T>
std::pair<T, T> row_max_and_sum(const T* x, int64_t n) {
  constexpr int64_t kLanes = 4 * kLineLanes<T>;
  T max_lanes[kLanes], sum_lanes[kLanes];
  for (int64_t lane = 0; lane < kLanes; ++lane) {
    max_lanes[lane] = -std::numeric_limits<T>::infinity();
    sum_lanes[lane] = 0;
  }
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int64_t lane = 0; lane < kLanes; ++lane) {
      const T v = x[i + lane];
      max_lanes[lane] = max_of(max_lanes[lane], v);
      sum_lanes[lane] += v;
    }
  }
  for (int64_t lane = 0; i < n; ++i, ++lane) {
    max_lanes[lane] = max_of(max_lanes[lane], x[i]);
    sum_lanes[lane] += x[i];
  }
  return {fold_lanes(max_lanes, kLanes, max_of<T>), fold_lanes(sum_lanes, kLanes, sum_of<T>)};
}

// The max of x[0, n) (NaN entries ignored).
template <class T>
T row_max(const T* x, int64_t n) {
  constexpr int64_t kLanes = 4 * kLineLanes<T>;
  T lanes[kLanes];
  for (int64_t lane = 0; lane < kLanes; ++lane) lanes[lane] = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int64_t lane = 0; lane < kLanes; ++lane) lanes[lane] = max_of(lanes[lane], x[i + lane]);
  }
  for (int64_t lane = 0; i < n; ++i, ++lane) lanes[lane] = max_of(lanes[lane], x[i]);
  return fold_lanes(lanes, kLanes, max_of<T>);
}

// The sum over i in [0, n) of term(i) (term may also write, e.g. out[i]), calling
// prefetch(i) once per cache line's worth of elements: the caller prefetches the next row
// there, so that its memory traffic overlaps this row's arithmetic (the hardware prefetcher
// stops at the row's end). `flatten` inlines term into the loop, which the vectoriser needs.
template <class T, class Prefetch, class Term>
__attribute__((flatten)) T sum_over_row(int64_t n, Prefetch&& prefetch, Term&& term) {
  constexpr int64_t kLanes = kLineLanes<T>;
  T lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    prefetch(i);
#pragma omp simd
    for (int64_t lane = 0; lane < kLanes; ++lane) lanes[lane] += term(i + lane);
  }
  for (int64_t lane = 0; i < n; ++i, ++lane) lanes[lane] += term(i);
  return fold_lanes(lanes, kLanes, sum_of<T>);
}

}  // namespace ember::cpu::EMBER_CPU_KERNELS
