// What the CUDA runtime reports about GPUs. The kernels arrive with the CUDA backend; this
// file makes the switch real: it is compiled wherever nvcc is found.
#include <cuda_runtime_api.h>

namespace ember::cuda {

// A machine without a GPU driver reports an error here ("CUDA driver version is
// insufficient"): that means zero devices, not a failure.
int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  return count;
}

}  // namespace ember::cuda
