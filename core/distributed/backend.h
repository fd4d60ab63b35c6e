// What a collective backend implements (MPI for CPU tensors, NCCL for CUDA tensors), and how the
// NCCL backend, compiled in cuda/, plugs itself into core's process group: it registers a factory
// from a static initialiser, and the process group builds it on the first CUDA collective,
// handing it MPI as the way to share its unique id.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "core/distributed/process_group.h"

namespace ember::distributed::detail {

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  // The tensors are contiguous, defined and on the backend's device; `op` is valid for the dtype.
  virtual std::shared_ptr<Work::Impl> all_reduce(const Tensor& tensor, ReduceOp op) = 0;
  virtual void broadcast(const Tensor& tensor, int root) = 0;
  // output is [world_size, ...input's shape], contiguous, of input's dtype and device.
  virtual void all_gather(const Tensor& input, const Tensor& output) = 0;
};

// What a device backend needs from MPI to set itself up.
struct Bootstrap {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  double timeout_seconds = 300;
  // Copies `bytes` bytes at `data` from rank `root` to every other rank (MPI_Bcast).
  std::function<void(void* data, size_t bytes, int root)> broadcast_bytes;
};

using DeviceBackendFactory = std::unique_ptr<CollectiveBackend> (*)(const Bootstrap& bootstrap);
// Called once, by cuda/distributed/nccl_process_group.cpp, when ember is built with NCCL.
void register_cuda_backend(DeviceBackendFactory factory);
bool cuda_backend_registered();

// The MPI side, defined by mpi_process_group.cpp (or, in a build without MPI, by
// without_mpi.cpp, whose versions throw): the CPU backend and the bootstrap of device backends.
CollectiveBackend& mpi_backend();
Bootstrap mpi_bootstrap();
bool built_with_mpi();
// Throws, on every rank, unless all ranks hand `op` a tensor of the same dtype and element count:
// MPI and NCCL cannot tell a mismatch from a short message, and would truncate or hang.
void check_same_on_every_rank(std::string_view op, const Tensor& tensor);

// Waits for `test` to report completion, aborting the job after timeout_seconds(); `op` names the
// collective in the abort message.
void wait_until(const std::function<bool()>& test, std::string_view op);

}  // namespace ember::distributed::detail
