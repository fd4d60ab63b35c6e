// DeviceScope (device_scope.h): the switch of the current device and its restoring.
#include "cuda/runtime/device_scope.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "core/cuda.h"
#include "cuda/runtime/check.h"

namespace ember::cuda {

DeviceScope::DeviceScope(int index, std::string_view op) {
  check_device(index);
  if (const cudaError_t status = cudaGetDevice(&previous_); status != cudaSuccess) {
    throw_cuda_error(fmt::format("{}: cudaGetDevice", op), status);
  }
  if (previous_ == index) return;
  if (const cudaError_t status = cudaSetDevice(index); status != cudaSuccess) {
    throw_cuda_error(fmt::format("{}: cudaSetDevice({})", op, index), status);
  }
}

DeviceScope::~DeviceScope() {
  int current = previous_;
  if (cudaGetDevice(&current) != cudaSuccess || (current != previous_ && cudaSetDevice(previous_) != cudaSuccess)) {
    cudaGetLastError();
  }
}

}  // namespace ember::cuda
