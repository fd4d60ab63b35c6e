// The run-time choices behind `--device` and `--threads`: which device to train on, and how
// many CPU threads ember's loops and BLAS may use.
#pragma once

#include <string>

#include "core/device.h"

namespace ember::train {

// "cpu", "cuda" (device 0) or "cuda:N". An unknown name throws ember::Error listing the
// accepted ones; a CUDA device this machine does not have (none at all, or N too large)
// throws saying so, e.g. "--device cuda: no CUDA device is available on this machine".
Device parse_device(const std::string& name);

// The number of OpenMP threads for ember's kernels and BLAS (omp_set_num_threads); 0 leaves
// the default (OMP_NUM_THREADS, else one per core). A negative count throws ember::Error.
void set_threads(int threads);

// The number of threads the next parallel region will use (what set_threads set, or the default).
int thread_count();

}  // namespace ember::train
