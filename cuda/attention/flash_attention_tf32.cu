// The mma.sync attention kernels and their launchers for float32 on TF32 tensor cores (taken when
// the user allows TF32).
#include "cuda/attention/flash_attention_launch.cuh"

namespace ember::cuda {
EMBER_INSTANTIATE_FLASH_ATTENTION(float)
}  // namespace ember::cuda
