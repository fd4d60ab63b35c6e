// The current stream (see stream.h): the default stream (0, the legacy default stream, as nvcc
// compiles ember without per-thread default streams) unless a graph capture on this thread has
// set its own.
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {
thread_local cudaStream_t current = nullptr;
}  // namespace

cudaStream_t current_stream() { return current; }

cudaStream_t exchange_current_stream(cudaStream_t stream) {
  const cudaStream_t previous = current;
  current = stream;
  return previous;
}

}  // namespace ember::cuda
