// The mma.sync attention kernels and their launchers for bfloat16.
#include "cuda/attention/flash_attention_launch.cuh"

namespace ember::cuda {
EMBER_INSTANTIATE_FLASH_ATTENTION(__nv_bfloat16)
}  // namespace ember::cuda
