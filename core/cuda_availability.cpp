// A CPU-only build sees no GPU; with the CUDA backend compiled in, cuda/device.cpp asks the
// CUDA runtime instead.
#include "core/cuda.h"

#ifndef EMBER_WITH_CUDA
namespace ember::cuda {
int device_count() { return 0; }
void set_allow_tf32(bool) {}
bool allow_tf32() { return false; }
}  // namespace ember::cuda
#endif
