// Storage lifetime and the CPU allocator.
#include "core/storage.h"

#include <bit>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/cuda.h"
#include "core/error.h"

namespace ember {
namespace {

// 64-byte aligned so vector loads never straddle cache lines.
//
// Blocks of 16 KiB and more are kept when freed and handed out again for the same size class.
// glibc gives such frees back to the OS (blocks from 128 KiB up are mapped and unmapped one by
// one; its heap is trimmed), and a training step that allocates them again then takes a page
// fault for every 4 KiB, each page zeroed by the kernel: measured without this cache, 56,000
// faults (220 MB) per step of the reference classifier (benchmarks/side_by_side). A warm step finds every
// block it needs here. Smaller blocks are left to malloc, whose bins reuse them. Builds with AddressSanitizer skip the cache, so that a
// use-after-free is still caught.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, int) override {
    const size_t size = block_size(nbytes);
    if (size >= kCachedMin) {
      std::lock_guard lock(mutex_);
      if (auto it = free_blocks_.find(size); it != free_blocks_.end()) {
        void* data = it->second;
        free_blocks_.erase(it);
        cached_bytes_ -= size;
        ++cached_reuses_;
        return data;
      }
      ++fresh_allocations_;
    }
    void* data = std::aligned_alloc(64, size);
    if (data == nullptr && size >= kCachedMin) {
      release_cache();  // the cached blocks may be what is missing
      data = std::aligned_alloc(64, size);
    }
    EMBER_CHECK(data != nullptr, "cpu allocator: out of memory allocating {} bytes", nbytes);
    return data;
  }

  CpuAllocatorStats stats() {
    std::lock_guard lock(mutex_);
    return {fresh_allocations_, cached_reuses_, static_cast<int64_t>(cached_bytes_)};
  }

  void deallocate(void* data, size_t nbytes, int) override {
    const size_t size = block_size(nbytes);
    if (kCacheEnabled && size >= kCachedMin) {
      std::lock_guard lock(mutex_);
      if (cached_bytes_ + size <= kCacheLimit) {
        free_blocks_.emplace(size, data);
        cached_bytes_ += size;
        return;
      }
    }
    std::free(data);
  }

 private:
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kCacheEnabled = false;
#else
  static constexpr bool kCacheEnabled = true;
#endif
  static constexpr size_t kCachedMin = size_t{16} << 10;  // 16 KiB
  static constexpr size_t kCacheLimit = size_t{2} << 30;  // idle cached bytes at most: 2 GiB

  // Small sizes round to 64 bytes. Large ones round up to one of 8 classes per power of two
  // (at most 12.5% more), so that tensors of nearly the same size share blocks.
  static size_t block_size(size_t nbytes) {
    const size_t rounded = (nbytes + 63) / 64 * 64;
    if (rounded < kCachedMin) return rounded;
    const size_t granule = std::bit_floor(rounded) / 8;
    return (rounded + granule - 1) / granule * granule;
  }

  void release_cache() {
    std::lock_guard lock(mutex_);
    for (auto& [size, data] : free_blocks_) std::free(data);
    free_blocks_.clear();
    cached_bytes_ = 0;
  }

  std::mutex mutex_;
  std::multimap<size_t, void*> free_blocks_;  // idle blocks by size
  size_t cached_bytes_ = 0;
  int64_t fresh_allocations_ = 0, cached_reuses_ = 0;
};

// Created on first use and never destroyed: a tensor in static storage may be freed after any
// destructor of this file would have run.
CpuAllocator& cpu_allocator() {
  static CpuAllocator* allocator = new CpuAllocator;
  return *allocator;
}

Allocator* allocators[kNumDeviceTypes] = {nullptr, nullptr};

}  // namespace

CpuAllocatorStats cpu_allocator_stats() { return cpu_allocator().stats(); }

void register_allocator(DeviceType type, Allocator* allocator) {
  allocators[static_cast<int>(type)] = allocator;
}

Allocator& allocator_for(Device device) {
  Allocator* allocator = allocators[static_cast<int>(device.type)];
  if (allocator == nullptr && device.is_cpu()) return cpu_allocator();
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
