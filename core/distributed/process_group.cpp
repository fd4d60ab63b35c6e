// The backend-independent half of the process group: argument checks, the choice of backend by
// the tensor's device, the timeout, and Work.
#include "core/distributed/process_group.h"

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "core/distributed/backend.h"
#include "core/ops/factory.h"

namespace ember::distributed {
namespace detail {

DeviceBackendFactory& cuda_factory() {
  static DeviceBackendFactory factory = nullptr;
  return factory;
}

void register_cuda_backend(DeviceBackendFactory factory) { cuda_factory() = factory; }
bool cuda_backend_registered() { return cuda_factory() != nullptr; }

void wait_until(const std::function<bool()>& test, std::string_view op) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const double limit = timeout_seconds();
  for (int spins = 0; !test(); ++spins) {
    // Spin a little (a collective between processes of one machine completes in microseconds),
    // then give the core to the other ranks that share it.
    if (spins > 1000) std::this_thread::yield();
    if ((spins & 255) == 0 && std::chrono::duration<double>(clock::now() - start).count() > limit) {
      abort(fmt::format("{}: no answer from the other ranks after {} s (EMBER_DISTRIBUTED_TIMEOUT); a rank may "
                        "have stopped or be waiting in a different collective",
                        op, limit));
    }
  }
}

}  // namespace detail

std::string_view backend_name(Backend backend) {
  return backend == Backend::MPI ? "MPI" : "NCCL";
}

bool has_backend(Backend backend) {
  return backend == Backend::MPI ? detail::built_with_mpi() : detail::cuda_backend_registered();
}

void require_backend(Backend backend) {
  if (has_backend(backend)) return;
  if (backend == Backend::MPI) {
    fail("distributed: the MPI backend was asked for, but this build of ember has none (MPI was not found when "
         "it was built: install libopenmpi-dev, as scripts/setup.sh does, and build again)");
  }
  fail("distributed: the NCCL backend was asked for, but this build of ember has none (it needs the CUDA "
       "backend and NCCL's nccl.h and libnccl when it is built)");
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

double timeout_seconds() {
  const char* text = std::getenv("EMBER_DISTRIBUTED_TIMEOUT");
  if (text == nullptr || *text == '\0') return 300;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  EMBER_CHECK(end != text && *end == '\0' && seconds > 0,
              "distributed: EMBER_DISTRIBUTED_TIMEOUT must be a positive number of seconds, got '{}'", text);
  return seconds;
}

bool Work::test() {
  EMBER_CHECK(impl_ != nullptr, "Work::test: this Work holds no collective");
  return impl_->test();
}

void Work::wait() {
  EMBER_CHECK(impl_ != nullptr, "Work::wait: this Work holds no collective");
  impl_->wait();
}

namespace {

// The backend for the tensor's device, after the checks every backend relies on.
detail::CollectiveBackend& backend_for(std::string_view op, const Tensor& tensor) {
  EMBER_CHECK(tensor.defined(), "{}: tensor is undefined", op);
  EMBER_CHECK(is_initialized(), "{}: the process group is not initialised (call distributed::init() first, in a "
              "program started by mpirun)", op);
  EMBER_CHECK(tensor.is_contiguous(), "{}: expected a contiguous tensor, got shape {} with strides {} (call "
              "contiguous() first)", op, shape_str(tensor.sizes()), shape_str(tensor.strides()));
  if (tensor.device().type == DeviceType::CPU) return detail::mpi_backend();
  if (!detail::cuda_backend_registered()) {
    fail("{}: a tensor on {} needs the NCCL backend, but this build of ember has none (it needs the CUDA backend "
         "and NCCL's nccl.h and libnccl when it is built)", op, tensor.device());
  }
  static std::once_flag created;
  static std::unique_ptr<detail::CollectiveBackend> cuda;
  std::call_once(created, [] {
    require_backend(Backend::MPI);
    cuda = (*detail::cuda_factory())(detail::mpi_bootstrap());
  });
  return *cuda;
}

void check_reduce_op(std::string_view op, const Tensor& tensor, ReduceOp reduce) {
  EMBER_CHECK(reduce != ReduceOp::Mean || is_floating_point(tensor.dtype()),
              "{}: the mean needs a floating point tensor (float32 or float64), got {}", op, tensor.dtype());
}

}  // namespace

void all_reduce(const Tensor& tensor, ReduceOp op) {
  backend_for("all_reduce", tensor);
  detail::check_same_on_every_rank("all_reduce", tensor);
  all_reduce_async(tensor, op).wait();
}

Work all_reduce_async(const Tensor& tensor, ReduceOp op) {
  detail::CollectiveBackend& backend = backend_for("all_reduce", tensor);
  check_reduce_op("all_reduce", tensor, op);
  return Work(backend.all_reduce(tensor, op));
}

void broadcast(const Tensor& tensor, int root) {
  detail::CollectiveBackend& backend = backend_for("broadcast", tensor);
  EMBER_CHECK(root >= 0 && root < world_size(), "broadcast: root must be a rank in [0, {}), got {}", world_size(),
              root);
  detail::check_same_on_every_rank("broadcast", tensor);
  backend.broadcast(tensor, root);
}

Tensor all_gather(const Tensor& tensor) {
  detail::CollectiveBackend& backend = backend_for("all_gather", tensor);
  Shape shape{world_size()};
  shape.insert(shape.end(), tensor.sizes().begin(), tensor.sizes().end());
  detail::check_same_on_every_rank("all_gather", tensor);
  Tensor output = empty(shape, tensor.options());
  backend.all_gather(tensor, output);
  return output;
}

}  // namespace ember::distributed
