// Splitting loops across the OpenMP thread pool that OpenBLAS also uses (its OpenMP build), so
// ember's loops and BLAS calls never oversubscribe the cores.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace ember {

// Below this many elements a loop runs on one thread: forking costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

// Calls body(begin, end) on disjoint chunks covering [0, n), in parallel when the work
// (n * cost_per_item) is worth it.
template <class Body>
void parallel_for(int64_t n, int64_t cost_per_item, Body&& body) {
  if (n <= 0) return;
  const int64_t work = n * std::max<int64_t>(cost_per_item, 1);
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (work < kParallelGrain || threads <= 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t count = omp_get_num_threads();
    const int64_t id = omp_get_thread_num();
    const int64_t chunk = (n + count - 1) / count;
    const int64_t begin = std::min(n, id * chunk);
    const int64_t end = std::min(n, begin + chunk);
    if (begin < end) body(begin, end);
  }
}

}  // namespace ember
