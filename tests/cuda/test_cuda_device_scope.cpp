// DeviceScope (cuda/runtime/device_scope.h): inside the scope the device it names is current;
// after it, on a normal exit or an exception, the device current before is current again; a
// device that does not exist is refused by name before anything is switched.
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "core/cuda.h"
#include "cuda/runtime/device_scope.h"
#include "helpers.h"

using ember::cuda::DeviceScope;

namespace {

int current_device() {
  int device = -1;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  return device;
}

}  // namespace

TEST_CASE("DeviceScope makes its device current and restores the previous one, also after a throw") {
  const int count = ember::cuda::device_count();
  const int before = current_device();
  for (int device = 0; device < count; ++device) {
    {
      const DeviceScope scope(device, "test");
      CHECK(current_device() == device);
    }
    CHECK(current_device() == before);
  }
  const int other = count > 1 ? (before + 1) % count : before;
  CHECK_THROWS_AS(([&] {
                    const DeviceScope scope(other, "test");
                    throw std::runtime_error("inside the scope");
                  }()),
                  std::runtime_error);
  CHECK(current_device() == before);
}

TEST_CASE("DeviceScope refuses a device that does not exist, naming it, and switches nothing") {
  const int count = ember::cuda::device_count();
  const int before = current_device();
  const std::string beyond = "cuda:" + std::to_string(count);
  CHECK_THROWS_WITH_ALL(DeviceScope(count, "test"), beyond.c_str(), "no such CUDA device");
  CHECK_THROWS_WITH_ALL(DeviceScope(-1, "test"), "cuda:-1", "no such CUDA device");
  CHECK(current_device() == before);
}
