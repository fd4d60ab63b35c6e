// Asking whether a GPU is there before asking for one.
#pragma once

namespace ember::cuda {

// Number of CUDA devices ember can use: 0 in a CPU-only build or on a machine without a GPU.
int device_count();
inline bool is_available() { return device_count() > 0; }

}  // namespace ember::cuda
