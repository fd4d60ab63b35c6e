// The bookkeeping of the CUDA caching allocator's free blocks, with private pools for CUDA
// graphs. Plain C++ with no CUDA call, so it is tested on the CPU (tests/test_block_pools.cpp);
// cuda/runtime/caching_allocator.cpp wraps it with cudaMalloc, locking and statistics.
//
// Pool 0 is the shared cache: a freed block waits there, by size class, for the next request
// of its size. A CUDA graph records the addresses its kernels use, and every replay uses them
// again, so the blocks a graph allocates while it is captured must never go to anyone else
// while the graph lives. While a capture routes allocations to a graph's pool, requests are
// served from that pool's own free blocks (or new ones, owned by it), and a block always goes
// back to the pool that owns it: a block the captured step allocates and frees is reused inside
// the step as it was at capture, and by nothing else. When the graph is destroyed its pool is
// released: its free blocks join the shared cache, and its blocks still held by tensors (the
// graph's outputs) join it when those tensors let go of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <unordered_map>
#include <vector>

namespace ember::cuda {

class BlockPools {
 public:
  using PoolId = uint64_t;
  static constexpr PoolId kSharedPool = 0;

  // A cached block of size class `size` from the pool allocations go to now, or nullptr when
  // it has none (the caller then allocates one and calls adopt()).
  void* take(size_t size) {
    std::vector<void*>& blocks = pools_[routed_to_][size];
    if (blocks.empty()) return nullptr;
    void* block = blocks.back();
    blocks.pop_back();
    return block;
  }

  // A newly allocated block becomes the current pool's (the shared cache's owns no record).
  void adopt(void* block) {
    if (routed_to_ != kSharedPool) owner_[block] = routed_to_;
  }

  // A freed block goes back to the pool that owns it.
  void give_back(void* block, size_t size) {
    auto owned = owner_.find(block);
    const PoolId pool = owned == owner_.end() ? kSharedPool : owned->second;
    pools_[pool][size].push_back(block);
  }

  // A new private pool, for one graph.
  PoolId create_pool() { return next_pool_++; }
  // Until end_routing(), allocations come from `pool`. Captures do not nest.
  void route_to(PoolId pool) { routed_to_ = pool; }
  void end_routing() { routed_to_ = kSharedPool; }
  PoolId routed_to() const { return routed_to_; }

  // The graph is gone: its free blocks join the shared cache, its live blocks will on free.
  void release_pool(PoolId pool) {
    if (pool == kSharedPool) return;
    auto& shared = pools_[kSharedPool];  // first: inserting it later could rehash under `found`
    auto found = pools_.find(pool);
    if (found != pools_.end()) {
      for (auto& [size, blocks] : found->second) {
        for (void* block : blocks) shared[size].push_back(block);
      }
      pools_.erase(found);
    }
    for (auto it = owner_.begin(); it != owner_.end();) {
      it = it->second == pool ? owner_.erase(it) : std::next(it);
    }
  }

  // The free blocks of the shared cache, to return to the driver (empty_cache); private pools
  // keep theirs, which their graphs' replays will write.
  std::unordered_map<size_t, std::vector<void*>>& shared_free_blocks() { return pools_[kSharedPool]; }

  // Free blocks of size class `size` in `pool` (for tests and statistics).
  size_t free_count(PoolId pool, size_t size) const {
    auto found = pools_.find(pool);
    if (found == pools_.end()) return 0;
    auto blocks = found->second.find(size);
    return blocks == found->second.end() ? 0 : blocks->second.size();
  }

 private:
  std::unordered_map<PoolId, std::unordered_map<size_t, std::vector<void*>>> pools_;
  std::unordered_map<void*, PoolId> owner_;  // blocks of private pools only
  PoolId routed_to_ = kSharedPool;
  PoolId next_pool_ = 1;
};

}  // namespace ember::cuda
