// Storage lifetime and the CPU allocator.
#include "core/storage.h"

#include <cstdlib>

#include "core/cuda.h"
#include "core/error.h"

namespace ember {
namespace {

// 64-byte aligned so vector loads never straddle cache lines.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, int) override {
    const size_t rounded = (nbytes + 63) / 64 * 64;
    void* data = std::aligned_alloc(64, rounded);
    EMBER_CHECK(data != nullptr, "cpu allocator: out of memory allocating {} bytes", nbytes);
    return data;
  }
  void deallocate(void* data, size_t, int) override { std::free(data); }
};

CpuAllocator cpu_allocator;
Allocator* allocators[kNumDeviceTypes] = {&cpu_allocator, nullptr};

}  // namespace

void register_allocator(DeviceType type, Allocator* allocator) {
  allocators[static_cast<int>(type)] = allocator;
}

Allocator& allocator_for(Device device) {
  Allocator* allocator = allocators[static_cast<int>(device.type)];
  if (allocator == nullptr) [[unlikely]] {
    if (device.is_cuda() && cuda::device_count() == 0) {
      fail("{}: no CUDA device is available on this machine (check ember::cuda::is_available() before asking "
           "for one)", device.str());
    }
    fail("{}: this build of ember has no memory allocator for {} devices", device.str(),
         device.is_cuda() ? "CUDA" : "CPU");
  }
  return *allocator;
}

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (nbytes > 0) data_ = allocator_for(device).allocate(nbytes, device.index);
}

Storage::~Storage() {
  if (data_ != nullptr) allocator_for(device_).deallocate(data_, nbytes_, device_.index);
}

}  // namespace ember
