// Storage: a reference-counted block of memory on one device, shared by a tensor and its
// views, plus the allocator each device type registers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace ember {

// Hands out memory for one device type. The CPU allocator registers itself; the CUDA backend
// registers a caching one from cuda/.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, int device_index) = 0;
  virtual void deallocate(void* data, size_t nbytes, int device_index) = 0;
};

void register_allocator(DeviceType type, Allocator* allocator);
// Throws ember::Error when no allocator is registered for device's type (e.g. CUDA in a
// CPU-only build).
Allocator& allocator_for(Device device);

// What the CPU allocator has done since the process started. Blocks of 16 KiB and more are
// cached when freed; a warm training step should find all of its blocks in the cache, so its
// fresh_allocations stays put (the CPU's counterpart of cuda::MemoryStats::cuda_malloc_calls).
struct CpuAllocatorStats {
  int64_t fresh_allocations = 0;  // blocks of 16 KiB and more taken from malloc: the cache had none
  int64_t cached_reuses = 0;      // blocks of 16 KiB and more handed out again from the cache
  int64_t cached_bytes = 0;       // idle bytes the cache holds now
};
CpuAllocatorStats cpu_allocator_stats();

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Bumped by every in-place write. Autograd compares it with the version a saved tensor
  // had when it was saved, so a tensor modified after being saved for backward is caught.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  uint64_t version_ = 0;
};

}  // namespace ember
