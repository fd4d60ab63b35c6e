// Software prefetch for row kernels (softmax, cross_entropy, layer_norm). Each reads a row from
// memory in its first pass and then computes on it in cache; asking for the next row during
// the compute-heavy pass overlaps the memory traffic of one row with the arithmetic of the
// other, which the hardware prefetcher alone does not do (it stops when the loads stop).
#pragma once

#include <algorithm>
#include <cstdint>

namespace ember::cpu {

// Elements computed on between two batches of prefetches: a batch is a few cache lines, few
// enough that the outstanding misses do not stall the loop.
inline constexpr int64_t kPrefetchChunk = 256;

// Prefetches the cache lines holding [begin, begin + count).
template <class T>
inline void prefetch_span(const T* begin, int64_t count) {
  const char* line = reinterpret_cast<const char*>(begin);
  const char* const end = reinterpret_cast<const char*>(begin + count);
  for (; line < end; line += 64) __builtin_prefetch(line);
}

// Calls body(c0, c1) over [0, n) in chunks of kPrefetchChunk, prefetching the matching chunk
// of `next` (the next row; nullptr for none) before each.
template <class T, class Body>
inline void for_chunks_prefetching(int64_t n, const T* next, Body&& body) {
  for (int64_t c0 = 0; c0 < n; c0 += kPrefetchChunk) {
    const int64_t c1 = std::min(n, c0 + kPrefetchChunk);
    if (next != nullptr) prefetch_span(next + c0, c1 - c0);
    body(c0, c1);
  }
}

}  // namespace ember::cpu
