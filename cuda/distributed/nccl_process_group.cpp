// The collectives on CUDA tensors, through NCCL: one communicator per process on the GPU
// local_rank() names (one process per GPU), built from a unique id rank 0 makes and MPI
// broadcasts. Every call is queued on ember's current_stream(), so it is ordered with the
// kernels before and after it. Compiled when CMake finds nccl.h and libnccl beside CUDA.
#include <nccl.h>

#include <fmt/format.h>

#include "core/cuda.h"
#include "core/distributed/backend.h"
#include "cuda/runtime/check.h"
#include "cuda/distributed/nccl_types.h"
#include "cuda/runtime/stream.h"

namespace ember::distributed {
namespace {

void check_nccl(ncclResult_t result, ncclComm_t comm, std::string_view op) {
  if (result == ncclSuccess || result == ncclInProgress) [[likely]] return;
  const char* detail = comm != nullptr ? ncclGetLastError(comm) : "";
  fail("{}: NCCL error: {}{}{}", op, ncclGetErrorString(result), (detail && *detail) ? ": " : "",
       detail ? detail : "");
}

// A collective queued on the stream. It is done when the event recorded after it has passed.
// While waiting, NCCL's asynchronous error (a peer that died, a network failure) is polled: the
// communicator is then aborted, which releases the stuck kernel, and the rank throws instead of
// waiting forever; a timeout aborts the job (detail::wait_until).
class NcclWork : public Work::Impl {
 public:
  NcclWork(ncclComm_t comm, std::string_view op) : comm_(comm), op_(op) {
    cuda::check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), op_);
    cuda::check(cudaEventRecord(event_, cuda::current_stream()), op_);
  }
  ~NcclWork() override { cudaEventDestroy(event_); }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  bool test() override {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) cuda::check(status, op_);
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &async), comm_, op_);
    if (async != ncclSuccess && async != ncclInProgress) {
      const std::string message = fmt::format("{}: NCCL reported an asynchronous error: {} ({})", op_,
                                              ncclGetErrorString(async), ncclGetLastError(comm_));
      ncclCommAbort(comm_);
      fail("{}", message);
    }
    return false;
  }
  void wait() override { detail::wait_until([this] { return test(); }, op_); }

 private:
  ncclComm_t comm_;
  std::string op_;
  cudaEvent_t event_ = nullptr;
};

class NcclBackend : public detail::CollectiveBackend {
 public:
  explicit NcclBackend(const detail::Bootstrap& bootstrap) {
    const int devices = cuda::device_count();
    EMBER_CHECK(devices > 0, "distributed: the NCCL backend needs a GPU, and rank {} sees none", bootstrap.rank);
    // One process per GPU: the processes of one machine take its GPUs in local-rank order.
    device_ = bootstrap.local_rank % devices;
    // The rank's GPU stays current for the rest of the process, not for a scope (so no
    // DeviceScope here): ncclCommInitRank binds the communicator to the current device, and
    // every kernel the rank launches afterwards runs there.
    cuda::check(cudaSetDevice(device_), "distributed: cudaSetDevice");
    ncclUniqueId id{};
    if (bootstrap.rank == 0) check_nccl(ncclGetUniqueId(&id), nullptr, "distributed: ncclGetUniqueId");
    bootstrap.broadcast_bytes(&id, sizeof id, 0);
    check_nccl(ncclCommInitRank(&comm_, bootstrap.world_size, id, bootstrap.rank), nullptr,
               "distributed: ncclCommInitRank");
  }
  ~NcclBackend() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  std::shared_ptr<Work::Impl> all_reduce(const Tensor& tensor, ReduceOp op) override {
    check_device("all_reduce", tensor);
    check_nccl(ncclAllReduce(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()),
                             nccl_datatype(tensor.dtype()), nccl_reduction(tensor.dtype(), op), comm_,
                             cuda::current_stream()),
               comm_, "all_reduce");
    return std::make_shared<NcclWork>(comm_, "all_reduce");
  }

  void broadcast(const Tensor& tensor, int root) override {
    check_device("broadcast", tensor);
    check_nccl(ncclBroadcast(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()),
                             nccl_datatype(tensor.dtype()), root, comm_, cuda::current_stream()),
               comm_, "broadcast");
    NcclWork(comm_, "broadcast").wait();
  }

  void all_gather(const Tensor& input, const Tensor& output) override {
    check_device("all_gather", input);
    check_nccl(ncclAllGather(input.raw_data(), output.raw_data(), static_cast<size_t>(input.numel()),
                             nccl_datatype(input.dtype()), comm_, cuda::current_stream()),
               comm_, "all_gather");
    NcclWork(comm_, "all_gather").wait();
  }

 private:
  void check_device(std::string_view op, const Tensor& tensor) const {
    EMBER_CHECK(tensor.device().index == device_,
                "{}: the tensor is on {}, but this rank's NCCL communicator is on cuda:{} (one process per GPU: "
                "put the model and batches on Device(kCUDA, distributed::local_rank()))",
                op, tensor.device(), device_);
  }

  int device_ = 0;
  ncclComm_t comm_ = nullptr;
};

std::unique_ptr<detail::CollectiveBackend> make_nccl_backend(const detail::Bootstrap& bootstrap) {
  return std::make_unique<NcclBackend>(bootstrap);
}

const bool registered = (detail::register_cuda_backend(&make_nccl_backend), true);

}  // namespace
}  // namespace ember::distributed
