// DeviceScope: makes one GPU the current device for a scope and restores the one current before.
// The runtime's current device is per thread, and the calls that set up or free per-device state
// (cudaMalloc, cudaFree, cublasCreate) act on it, so code that serves any device switches to
// the one it serves and leaves the caller's choice as it found it, on every path out.
#pragma once

#include <string_view>

namespace ember::cuda {

class DeviceScope {
 public:
  // Checks that cuda:`index` exists (check_device), then makes it current; `op` names the
  // caller in the error when it does not exist or the runtime refuses the switch.
  DeviceScope(int index, std::string_view op);
  // Restores the previous device. A destructor cannot throw: a failure here is cleared rather
  // than left for the next op's check_launch to report as its own.
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace ember::cuda
