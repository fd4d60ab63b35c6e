// The registry of cuBLAS handles, one per device (cuda/runtime/cublas_handle.h).
#include "cuda/runtime/cublas_handle.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <vector>

#include "core/cuda_graph.h"
#include "core/error.h"
#include "core/tensor.h"
#include "cuda/runtime/check.h"
#include "cuda/runtime/device_scope.h"
#include "cuda/runtime/stream.h"

namespace ember::cuda {
namespace {

// 32 MiB: what cuBLAS asks of a workspace on Hopper for its fastest kernels.
constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

struct DeviceHandle {
  cublasHandle_t handle = nullptr;
  bool bound = false;             // whether `stream` below is bound, with the workspace
  cudaStream_t stream = nullptr;
  Tensor* workspace = nullptr;    // kWorkspaceBytes from ember's allocator, kept to the end
};

std::mutex handles_mutex;
std::vector<DeviceHandle> handles;  // by device index

// cuda:`device`'s entry, its handle and workspace made if they are not yet; with handles_mutex
// held. cublasCreate works on the current device, which the caller has made `device`.
// Handles and their workspaces are never destroyed: at process exit the CUDA context may
// already be gone, and cublasDestroy or a free would then fail.
DeviceHandle& handle_entry(int device) {
  if (handles.size() <= static_cast<size_t>(device)) handles.resize(device + 1);
  DeviceHandle& entry = handles[device];
  if (entry.handle == nullptr) {
    EMBER_CHECK(!is_capturing_graph(), "matmul: the first product on cuda:{} is inside a CUDA graph capture, where "
                "cuBLAS cannot be set up; capture on the device the step's tensors are on, or run one step "
                "uncaptured first", device);
    check(cublasCreate(&entry.handle), "matmul: cublasCreate");
    entry.workspace = new Tensor(make_tensor({kWorkspaceBytes / 8}, kInt64, Device::cuda(device)));
  }
  return entry;
}

}  // namespace

cublasHandle_t cublas_handle_for_current_device() {
  int device = 0;
  check(cudaGetDevice(&device), "matmul");
  std::lock_guard<std::mutex> lock(handles_mutex);
  DeviceHandle& entry = handle_entry(device);
  const cudaStream_t stream = current_stream();
  if (!entry.bound || entry.stream != stream) {
    check(cublasSetStream(entry.handle, stream), "matmul: cublasSetStream");
    check(cublasSetWorkspace(entry.handle, entry.workspace->raw_data(), static_cast<size_t>(kWorkspaceBytes)),
          "matmul: cublasSetWorkspace");
    entry.stream = stream;
    entry.bound = true;
  }
  return entry.handle;
}

void prepare_cublas(int device) {
  const DeviceScope scope(device, "CudaGraph::capture");
  std::lock_guard<std::mutex> lock(handles_mutex);
  handle_entry(device);
}

}  // namespace ember::cuda
