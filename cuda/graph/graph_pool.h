// The caching allocator's private pools for CUDA graphs (cuda/runtime/block_pools.h explains them),
// for cuda/graph.cpp. While allocations are routed to a graph's pool, every allocation on that
// device comes from it: the capture is the only work running then.
#pragma once

#include <cstdint>

namespace ember::cuda {

uint64_t create_graph_pool(int device);
void route_allocations_to(int device, uint64_t pool);
void end_allocation_routing(int device);
void release_graph_pool(int device, uint64_t pool);

}  // namespace ember::cuda
