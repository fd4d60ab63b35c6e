// Asking whether a GPU is there before asking for one.
#pragma once

namespace ember::cuda {

// Number of CUDA devices ember can use: 0 in a CPU-only build or on a machine without a GPU.
int device_count();
inline bool is_available() { return device_count() > 0; }

// Whether float32 matrix products on CUDA may use TF32 tensor cores: much faster, but their
// inputs are rounded to 10 mantissa bits, so results no longer match the CPU's closely. Off by
// default; a no-op without the CUDA backend.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace ember::cuda
