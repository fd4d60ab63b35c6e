// The process group on MPI: joining the job, rank and world size, the CPU collectives, aborting
// the job, and the bootstrap NCCL's communicator is built with. Compiled when CMake finds MPI.
#include <mpi.h>

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "core/distributed/backend.h"
#include "core/autograd/grad_mode.h"
#include "core/distributed/mpi_types.h"
#include "core/ops/elementwise.h"

namespace ember::distributed {
namespace {

struct State {
  bool initialized = false;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
};

State& state() {
  static State s;
  return s;
}

void check_mpi(int code, std::string_view op) {
  if (code == MPI_SUCCESS) [[likely]] return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("{}: MPI error: {}", op, std::string_view(text, static_cast<size_t>(length)));
}

// MPI counts are ints: a tensor of more elements is reduced in pieces of at most this many.
constexpr int64_t kMaxCount = int64_t{1} << 30;

// A collective started with one non-blocking MPI call per piece; a mean is divided by the world
// size once every piece has arrived.
class MpiWork : public Work::Impl {
 public:
  MpiWork(Tensor tensor, bool mean) : tensor_(std::move(tensor)), mean_(mean) {}
  std::vector<MPI_Request> requests;

  bool test() override {
    if (done_) return true;
    int flag = 0;
    check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, MPI_STATUSES_IGNORE),
              "all_reduce");
    if (flag) finish();
    return done_;
  }
  void wait() override {
    if (!done_) detail::wait_until([this] { return test(); }, "all_reduce");
  }

 private:
  void finish() {
    done_ = true;
    if (mean_) {
      NoGradGuard no_grad;
      tensor_.mul_(1.0 / state().world_size);
    }
  }
  Tensor tensor_;  // kept alive until MPI has written it
  bool mean_;
  bool done_ = false;
};

class MpiBackend : public detail::CollectiveBackend {
 public:
  std::shared_ptr<Work::Impl> all_reduce(const Tensor& tensor, ReduceOp op) override {
    // Every rank holds the same dtype here (checked before), so every rank refuses alike.
    EMBER_CHECK(!is_16_bit_floating_point(tensor.dtype()), "all_reduce: {} tensors cannot be summed over MPI (it "
                "has no 16-bit floating point type); convert them with .to(kFloat32) first", tensor.dtype());
    auto work = std::make_shared<MpiWork>(tensor, op == ReduceOp::Mean);
    auto* bytes = static_cast<char*>(tensor.raw_data());
    const size_t element = element_size(tensor.dtype());
    for (int64_t begin = 0; begin < tensor.numel(); begin += kMaxCount) {
      const int count = static_cast<int>(std::min(kMaxCount, tensor.numel() - begin));
      MPI_Request request;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, bytes + begin * element, count, mpi_datatype(tensor.dtype()),
                               mpi_sum(tensor.dtype()), MPI_COMM_WORLD, &request),
                "all_reduce");
      work->requests.push_back(request);
    }
    return work;
  }

  void broadcast(const Tensor& tensor, int root) override {
    broadcast_bytes(tensor.raw_data(), tensor.numel() * element_size(tensor.dtype()), root);
  }

  void all_gather(const Tensor& input, const Tensor& output) override {
    const int64_t bytes = input.numel() * static_cast<int64_t>(element_size(input.dtype()));
    EMBER_CHECK(bytes <= INT_MAX, "all_gather: {} bytes per rank is more than MPI's int count allows ({})", bytes,
                INT_MAX);
    if (bytes == 0) return;
    check_mpi(MPI_Allgather(input.raw_data(), static_cast<int>(bytes), MPI_BYTE, output.raw_data(),
                            static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD),
              "all_gather");
  }

  static void broadcast_bytes(void* data, size_t bytes, int root) {
    auto* base = static_cast<char*>(data);
    for (size_t begin = 0; begin < bytes; begin += kMaxCount) {
      const int count = static_cast<int>(std::min<size_t>(kMaxCount, bytes - begin));
      check_mpi(MPI_Bcast(base + begin, count, MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
    }
  }
};

// The terminate handler: an exception nobody caught, on any rank, ends the whole job with its
// message. Without it the rank would die and the others wait in their next collective.
[[noreturn]] void abort_on_uncaught_exception() {
  std::string message = "terminate called without an active exception";
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& error) {
      message = fmt::format("uncaught exception: {}", error.what());
    } catch (...) {
      message = "uncaught exception of unknown type";
    }
  }
  abort(message);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

namespace detail {

bool built_with_mpi() { return true; }

// All ranks must hand a collective the same dtype and element count: MPI itself cannot tell a
// mismatch from a short message, and would truncate or hang.
void check_same_on_every_rank(std::string_view op, const Tensor& tensor) {
  const int64_t mine[2] = {static_cast<int64_t>(tensor.dtype()), tensor.numel()};
  std::vector<int64_t> all(2 * static_cast<size_t>(state().world_size));
  check_mpi(MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, MPI_COMM_WORLD), op);
  for (int r = 0; r < state().world_size; ++r) {
    if (all[2 * r] != mine[0] || all[2 * r + 1] != mine[1]) {
      fail("{}: ranks disagree: rank {} has {} {} elements, rank {} has {} {} elements", op, state().rank, mine[1],
           tensor.dtype(), r, all[2 * r + 1], static_cast<DType>(all[2 * r]));
    }
  }
}


CollectiveBackend& mpi_backend() {
  static MpiBackend backend;
  return backend;
}

Bootstrap mpi_bootstrap() {
  EMBER_CHECK(state().initialized, "distributed: the process group is not initialised (call distributed::init())");
  return Bootstrap{.rank = state().rank,
                   .world_size = state().world_size,
                   .local_rank = state().local_rank,
                   .timeout_seconds = timeout_seconds(),
                   .broadcast_bytes = &MpiBackend::broadcast_bytes};
}

}  // namespace detail

void init() {
  State& s = state();
  if (s.initialized) return;
  int already = 0;
  check_mpi(MPI_Initialized(&already), "distributed::init");
  if (!already) {
    // FUNNELED: every MPI call comes from the thread that called init (the training loop and the
    // backward pass run on it); OpenMP's worker threads never call MPI.
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "distributed::init");
    std::atexit(finalize_at_exit);
  }
  // Errors come back as codes, which check_mpi turns into ember::Error naming the collective.
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "distributed::init");
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &s.rank), "distributed::init");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &s.world_size), "distributed::init");
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "distributed::init");
  check_mpi(MPI_Comm_rank(node, &s.local_rank), "distributed::init");
  MPI_Comm_free(&node);
  std::set_terminate(abort_on_uncaught_exception);
  s.initialized = true;
}

bool is_initialized() { return state().initialized; }
int rank() { return state().rank; }
int world_size() { return state().world_size; }
int local_rank() { return state().local_rank; }

void barrier() {
  EMBER_CHECK(is_initialized(), "barrier: the process group is not initialised (call distributed::init() first)");
  MPI_Request request;
  check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &request), "barrier");
  detail::wait_until(
      [&] {
        int flag = 0;
        check_mpi(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), "barrier");
        return flag != 0;
      },
      "barrier");
}

void abort(std::string_view message, int exit_code) {
  std::fprintf(stderr, "ember: rank %d of %d: %.*s\n", state().rank, state().world_size,
               static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace ember::distributed
