// One cuBLAS handle per device, created on first use, for every cuBLAS call ember makes
// (cuda/ops/matmul.cpp's products).
//
// Before each use the handle is bound to the current stream (cuda/runtime/stream.h: the default
// stream, or a graph capture's), so its calls are ordered with the ops around them without
// events. Binding a stream resets cuBLAS to its default workspace, which it may allocate on its
// own, and an allocation cannot happen inside a graph capture; so each handle gets a workspace of
// its own once, from ember's allocator, bound again after every stream change.
#pragma once

#include <cublas_v2.h>

namespace ember::cuda {

// The current device's handle, bound to the current stream with its own workspace. The first
// call on a device creates it, which cuBLAS cannot do inside a graph capture: that is refused
// with an ember::Error (prepare_cublas makes the handle beforehand).
cublasHandle_t cublas_handle_for_current_device();

// Creates cuda:`device`'s handle and workspace unless they exist. Called by CudaGraph::capture,
// so that the handle is made before the capture starts and its workspace comes from the shared
// cache rather than from the graph's private pool.
void prepare_cublas(int device);

}  // namespace ember::cuda
