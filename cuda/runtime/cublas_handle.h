// The cuBLAS handle of each device (cuda/ops/matmul.cpp), made before a CUDA graph capture: cuBLAS
// cannot create a handle while a stream is being captured (CUBLAS_STATUS_NOT_INITIALIZED), and
// the handle's workspace, allocated with it, must come from the shared cache rather than from
// the graph's private pool.
#pragma once

namespace ember::cuda {

// Creates cuda:`device`'s handle and workspace unless they exist. Called by CudaGraph::capture.
void prepare_cublas(int device);

}  // namespace ember::cuda
