// What the CUDA runtime reports about GPUs, the device check every CUDA storage passes, and
// synchronize() and the count of the host's waits for the GPU. Compiled wherever nvcc is
// found, GPU or not.
#include <cuda_runtime_api.h>

#include <atomic>

#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "core/error.h"
#include "cuda/runtime/check.h"
#include "cuda/runtime/host_wait.h"
#include "cuda/ops/index_check_kernels.h"

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

void check_device(int index) {
  // GPUs do not come and go while a program runs: ask the driver once.
  static const int count = device_count();
  if (count == 0) [[unlikely]] {
    fail("cuda:{}: no CUDA device is available on this machine (check ember::cuda::is_available() before "
         "asking for one)", index);
  }
  if (index < 0 || index >= count) [[unlikely]] {
    fail("cuda:{}: no such CUDA device: this machine has {} (cuda:0{})", index, count,
         count > 1 ? fmt::format(" to cuda:{}", count - 1) : "");
  }
}

namespace {
std::atomic<int64_t> host_waits{0};
}  // namespace

void host_waited_for_gpu() {
  host_waits.fetch_add(1, std::memory_order_relaxed);
  report_index_errors();
}

int64_t host_synchronizations() { return host_waits.load(std::memory_order_relaxed); }

void synchronize() {
  if (device_count() == 0) return;
  EMBER_CHECK(!is_capturing_graph(), "synchronize: the host cannot wait for the GPU inside a CUDA graph capture");
  check(cudaDeviceSynchronize(), "synchronize");
  host_waited_for_gpu();
}

}  // namespace ember::cuda
