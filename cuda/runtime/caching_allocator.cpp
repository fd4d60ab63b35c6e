// The CUDA caching allocator: device memory for CUDA storages. A freed block is kept, by its
// rounded size, and handed to the next request of that size, so once a training step has run
// (the same tensors, the same sizes, step after step) it makes no cudaMalloc or cudaFree at
// all: those synchronise the device and cost far more than the kernels of a small model.
//
// The free blocks are kept by BlockPools (cuda/runtime/block_pools.h), which also gives each CUDA graph
// a private pool for what its capture allocates (cuda/graph/graph.cpp).
//
// Every kernel and copy runs on one stream (the default stream), so a block freed on the host
// while a kernel still reads it can be reused at once: the next kernel writing it is queued
// behind the reader on the same stream. That is why there are no events here.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "core/error.h"
#include "core/storage.h"
#include "cuda/runtime/block_pools.h"
#include "cuda/runtime/check.h"
#include "cuda/runtime/device_scope.h"
#include "cuda/graph/graph_pool.h"

namespace ember::cuda {
namespace {

// Sizes are rounded up to a class: 512-byte steps below 1 MiB, and above that steps of an
// eighth of the size's power of two (at most 12.5% waste). Requests of nearly the same size
// then share blocks, and every block is 512-byte aligned for vector loads.
size_t size_class(size_t nbytes) {
  constexpr size_t kSmallStep = 512, kLarge = size_t{1} << 20;
  if (nbytes < kLarge) return std::max<size_t>(kSmallStep, (nbytes + kSmallStep - 1) / kSmallStep * kSmallStep);
  size_t power = kLarge;
  while (power <= nbytes / 2) power *= 2;  // power * 2 <= nbytes, without overflowing past 2^63
  const size_t step = power / 8;
  // Rounding up would wrap past SIZE_MAX only for a request no device can hold: it keeps its
  // size and fails in cudaMalloc with the out-of-memory message.
  if (nbytes > std::numeric_limits<size_t>::max() - step) return nbytes;
  return (nbytes + step - 1) / step * step;
}

// cudaMalloc that a graph capture on this thread allows. A capture in
// cudaStreamCaptureModeThreadLocal refuses "potentially unsafe" calls such as cudaMalloc made by
// its own thread, and a graph's private pool starts empty, so its first allocations would fail
// the capture. Relaxed mode permits the call for its duration; the mode is restored after it.
// Allocating during a capture is safe here: the block is not touched by the call itself, and the
// graph records only the kernels that later use its address.
cudaError_t capture_safe_malloc(void** block, size_t size) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  const cudaError_t exchanged = cudaThreadExchangeStreamCaptureMode(&mode);
  const cudaError_t status = cudaMalloc(block, size);
  if (exchanged == cudaSuccess) cudaThreadExchangeStreamCaptureMode(&mode);  // back to what it was
  return status;
}

struct DevicePool {
  BlockPools blocks;  // the free ones, by pool and size class
  MemoryStats stats;
};

class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, int device) override {
    // Before any CUDA call: no GPU, or a bad index, is a clear error here rather than an
    // obscure CUDA failure later. (An empty tensor allocates nothing, so it exists anywhere.)
    check_device(device);
    const size_t size = size_class(nbytes);
    std::lock_guard lock(mutex_);
    DevicePool& pool = pools_[device];
    void* block = pool.blocks.take(size);
    if (block == nullptr) {
      block = malloc_with_retry(pool, size, device, nbytes);
      pool.blocks.adopt(block);
    }
    pool.stats.allocated_bytes += static_cast<int64_t>(size);
    pool.stats.peak_allocated_bytes = std::max(pool.stats.peak_allocated_bytes, pool.stats.allocated_bytes);
    return block;
  }

  // Called from Storage's destructor: it must not throw, and it never calls CUDA.
  void deallocate(void* data, size_t nbytes, int device) override {
    const size_t size = size_class(nbytes);
    std::lock_guard lock(mutex_);
    DevicePool& pool = pools_[device];
    pool.blocks.give_back(data, size);
    pool.stats.allocated_bytes -= static_cast<int64_t>(size);
  }

  void empty_cache() {
    // cudaFree synchronises the device, which would invalidate the capture.
    EMBER_CHECK(!is_capturing_graph(), "empty_cache: cannot return memory to the driver inside a CUDA graph capture");
    std::lock_guard lock(mutex_);
    for (auto& [device, pool] : pools_) release_cached(pool, device);
  }

  MemoryStats stats(int device) {
    std::lock_guard lock(mutex_);
    auto found = pools_.find(device);
    return found == pools_.end() ? MemoryStats{} : found->second.stats;
  }

  void reset_peak(int device) {
    std::lock_guard lock(mutex_);
    auto found = pools_.find(device);
    if (found != pools_.end()) found->second.stats.peak_allocated_bytes = found->second.stats.allocated_bytes;
  }

  // The graph pools of one device (see BlockPools).
  template <class Action>
  auto with_blocks(int device, Action action) {
    std::lock_guard lock(mutex_);
    return action(pools_[device].blocks);
  }

 private:
  // On an out-of-memory the cached blocks (of every size) go back to the driver and the
  // request is tried once more; only then is it the user's problem. Not during a graph capture:
  // cudaFree synchronises the device, which would invalidate the capture, so there the first
  // out-of-memory is reported as it is.
  void* malloc_with_retry(DevicePool& pool, size_t size, int device, size_t requested) {
    DeviceScope scope(device, "cuda allocator");
    const bool capturing = pool.blocks.routed_to() != BlockPools::kSharedPool;
    void* block = nullptr;
    cudaError_t status = capture_safe_malloc(&block, size);
    if (status == cudaErrorMemoryAllocation && !capturing) {
      cudaGetLastError();  // clear it, so that the next op does not report it again
      release_cached(pool, device);
      status = capture_safe_malloc(&block, size);
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();  // the message says 0 then
      fail("cuda allocator: out of memory on cuda:{} allocating {} bytes (rounded to {}){}: ember holds {} bytes "
           "for tensors (peak {}), the device has {} of {} bytes free",
           device, requested, size,
           capturing ? " while a CUDA graph was captured (the cache is not returned to the driver then)" : "",
           pool.stats.allocated_bytes, pool.stats.peak_allocated_bytes, free_bytes, total_bytes);
    }
    check(status, "cuda allocator: cudaMalloc");
    ++pool.stats.cuda_malloc_calls;
    pool.stats.reserved_bytes += static_cast<int64_t>(size);
    return block;
  }

  void release_cached(DevicePool& pool, int device) {
    DeviceScope scope(device, "cuda allocator");
    for (auto& [size, blocks] : pool.blocks.shared_free_blocks()) {
      // Each block leaves the cache before it is freed: if a cudaFree fails and throws, no
      // freed pointer is left behind to be handed out or freed again.
      while (!blocks.empty()) {
        void* block = blocks.back();
        blocks.pop_back();
        check(cudaFree(block), "cuda allocator: cudaFree");
        ++pool.stats.cuda_free_calls;
        pool.stats.reserved_bytes -= static_cast<int64_t>(size);
      }
    }
  }

  std::mutex mutex_;
  std::map<int, DevicePool> pools_;
};

// Never destroyed: tensors held by static objects are freed after static destructors have
// run, and the driver reclaims the memory when the process ends anyway.
CachingAllocator& caching_allocator() {
  static auto* allocator = new CachingAllocator;
  return *allocator;
}

struct RegisterCachingAllocator {
  RegisterCachingAllocator() { register_allocator(DeviceType::CUDA, &caching_allocator()); }
} register_caching_allocator;

}  // namespace

MemoryStats memory_stats(int device) { return caching_allocator().stats(device); }
void reset_peak_memory_stats(int device) { caching_allocator().reset_peak(device); }
void empty_cache() { caching_allocator().empty_cache(); }

uint64_t create_graph_pool(int device) {
  return caching_allocator().with_blocks(device, [](BlockPools& blocks) { return blocks.create_pool(); });
}
void route_allocations_to(int device, uint64_t pool) {
  caching_allocator().with_blocks(device, [pool](BlockPools& blocks) { blocks.route_to(pool); });
}
void end_allocation_routing(int device) {
  caching_allocator().with_blocks(device, [](BlockPools& blocks) { blocks.end_routing(); });
}
void release_graph_pool(int device, uint64_t pool) {
  caching_allocator().with_blocks(device, [pool](BlockPools& blocks) { blocks.release_pool(pool); });
}

}  // namespace ember::cuda
