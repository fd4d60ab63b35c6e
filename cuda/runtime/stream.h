// The stream every ember kernel, copy and cuBLAS call is queued on.
//
// Outside a CUDA graph capture it is the legacy default stream, for all of ember: one stream,
// so work is ordered without events (see caching_allocator.cpp). A capture cannot record the
// legacy default stream, so while a graph is being captured (cuda/graph/graph.cpp) the current stream
// is the capture's own stream, and every launch must name current_stream() rather than relying
// on the default: `kernel<<<grid, block, 0, current_stream()>>>`, `cudaMemsetAsync(..., current_stream())`.
//
// fmt-free: .cu files include it.
#pragma once

#include <cuda_runtime_api.h>

namespace ember::cuda {

cudaStream_t current_stream();

// Makes `stream` the current stream of the calling thread until the returned previous value is
// set back. Used by graph capture; ordinary code never changes the stream.
cudaStream_t exchange_current_stream(cudaStream_t stream);

}  // namespace ember::cuda
