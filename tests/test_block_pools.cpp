// The caching allocator's pools for CUDA graphs (cuda/runtime/block_pools.h), checked on the CPU with
// fake addresses: a captured step's blocks stay with its graph, come back to it when freed,
// are reused inside the step, and join the shared cache only when the graph is released.
#include <doctest/doctest.h>

#include <cstdint>

#include "cuda/runtime/block_pools.h"

namespace {

using ember::cuda::BlockPools;

void* address(uintptr_t n) { return reinterpret_cast<void*>(n * 512); }

TEST_CASE("outside a capture, a freed block serves the next request of its size") {
  BlockPools pools;
  CHECK(pools.take(512) == nullptr);
  pools.adopt(address(1));
  pools.give_back(address(1), 512);
  CHECK(pools.take(1024) == nullptr);  // another size class
  CHECK(pools.take(512) == address(1));
  CHECK(pools.take(512) == nullptr);
}

TEST_CASE("a capture's blocks belong to its graph's pool and never serve others") {
  BlockPools pools;
  pools.give_back(address(1), 512);  // a shared block, cached before the capture
  const BlockPools::PoolId graph = pools.create_pool();
  CHECK(graph != BlockPools::kSharedPool);

  pools.route_to(graph);
  CHECK(pools.take(512) == nullptr);  // the shared cache does not serve the capture
  pools.adopt(address(2));            // allocated for the captured step
  pools.give_back(address(2), 512);   // freed inside the step...
  CHECK(pools.take(512) == address(2));  // ...and reused inside it, as every replay will
  pools.adopt(address(3));
  pools.end_routing();

  // After the capture the graph's blocks, freed, go back to the graph, not to the shared cache.
  pools.give_back(address(2), 512);
  CHECK(pools.take(512) == address(1));
  CHECK(pools.take(512) == nullptr);
  CHECK(pools.free_count(graph, 512) == 1);

  // A second graph has a pool of its own.
  const BlockPools::PoolId other = pools.create_pool();
  CHECK(other != graph);
  pools.route_to(other);
  CHECK(pools.take(512) == nullptr);
  pools.end_routing();
}

TEST_CASE("releasing a graph's pool hands its blocks to the shared cache, the live ones when freed") {
  BlockPools pools;
  const BlockPools::PoolId graph = pools.create_pool();
  pools.route_to(graph);
  pools.adopt(address(4));  // freed inside the step
  pools.adopt(address(5));  // an output still held by a tensor when the graph goes
  pools.give_back(address(4), 1024);
  pools.end_routing();

  pools.release_pool(graph);
  CHECK(pools.free_count(graph, 1024) == 0);
  CHECK(pools.take(1024) == address(4));
  pools.give_back(address(5), 1024);  // the output's tensor lets go: the shared cache gets it
  CHECK(pools.take(1024) == address(5));
  CHECK(pools.shared_free_blocks()[1024].empty());
  pools.release_pool(BlockPools::kSharedPool);  // releasing the shared cache means nothing
}

}  // namespace
