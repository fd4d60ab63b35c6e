// The GPU side of core's index range check (core/ops/index_check.h). A kernel that finds an
// index out of range writes it into one small record in pinned host memory that the GPU writes
// through; the host looks at the record whenever it waits for the GPU anyway (a copy to the
// host, synchronize()) and throws the error then. So checking never adds a synchronisation
// to a training step, and a bad index still becomes an ember::Error, not a crash.
//
// fmt-free: nvcc reads this header (see cuda/README.md).
#pragma once

#include <cstdint>

namespace ember::cuda {

// The first bad index a kernel found since the host last looked: which message describes it
// (an id the host handed out, see cuda/ops/index_check.cpp), the value and its flat position.
struct IndexErrorRecord {
  int found;
  int message;
  long long value;
  long long position;
};

// Checks index[0, count) against [0, limit), letting `ignore` through when has_ignore; the
// first bad value seen is written into `record` (a device pointer to the pinned record).
void launch_check_index_range(const int64_t* index, int64_t count, int64_t limit, bool has_ignore, int64_t ignore,
                              int message, IndexErrorRecord* record);

// Throws the error a kernel recorded, if any, and clears the record. Call it only after the
// host has waited for the GPU, so every kernel queued before has written what it found.
void report_index_errors();

#ifdef __CUDACC__
// Records one bad index. Only the first finder writes: the others see `found` already set.
__device__ inline void record_bad_index(IndexErrorRecord* record, int message, int64_t value, int64_t position) {
  if (atomicCAS(&record->found, 0, 1) != 0) return;
  record->message = message;
  record->value = value;
  record->position = position;
  __threadfence_system();
}
#endif

}  // namespace ember::cuda
