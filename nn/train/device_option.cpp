// parse_device adds to Device::parse what only a running program can know: whether the
// device exists here.
#include "nn/train/device_option.h"

#include <omp.h>

#include "core/cuda.h"
#include "core/error.h"

namespace ember::train {

Device parse_device(const std::string& name) {
  Device device;
  try {
    device = Device::parse(name);
  } catch (const Error&) {
    fail("--device: unknown device '{}' (expected cpu, cuda or cuda:N)", name);
  }
  if (device.is_cuda()) {
    const int available = cuda::device_count();
    EMBER_CHECK(available > 0, "--device {}: no CUDA device is available on this machine", name);
    EMBER_CHECK(device.index < available, "--device {}: this machine has {} CUDA device{} (cuda:0{})", name,
                available, available == 1 ? "" : "s", available == 1 ? "" : fmt::format("..cuda:{}", available - 1));
  }
  return device;
}

void set_threads(int threads) {
  EMBER_CHECK(threads >= 0, "--threads: expected 0 (the default) or a positive count, got {}", threads);
  if (threads > 0) omp_set_num_threads(threads);
}

int thread_count() { return omp_get_max_threads(); }

}  // namespace ember::train
