// The process group of a data-parallel job: which process this is (rank), how many there are
// (world size), and the collectives a trainer needs on tensors. CPU tensors go through MPI, CUDA
// tensors through NCCL (one process per GPU), whose communicator is bootstrapped over MPI.
//
//   mpirun -np 2 ./train                  # two processes on this machine
//   mpirun -np 8 --hostfile hosts ./train # eight processes on the machines listed in `hosts`
//
//   distributed::init();                  // reads the launcher's environment
//   distributed::all_reduce(grad, distributed::ReduceOp::Mean);
//
// Every rank must call the same collectives in the same order with tensors of the same shape and
// dtype, as with MPI itself. Without init(), rank() is 0 and world_size() is 1, so a program that
// runs both alone and under mpirun can ask them unconditionally.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace ember::distributed {

enum class Backend { MPI, NCCL };
std::string_view backend_name(Backend backend);
// Whether this build of ember has the backend compiled in (MPI when the library was built with
// Debian's libopenmpi-dev; NCCL when nccl.h and libnccl were found beside CUDA).
bool has_backend(Backend backend);
// Throws "distributed: the NCCL backend was asked for, but this build of ember has none (...)"
// unless has_backend(backend).
void require_backend(Backend backend);

// Whether the process was started by a launcher (mpirun/srun) that set a world size in its
// environment; a program can call init() only then, and run alone otherwise.
bool launched_by_mpi();

// Joins the job the launcher started: initialises MPI (once; later calls do nothing), makes MPI
// errors return codes that ember turns into ember::Error, and makes an uncaught exception on any
// rank abort the whole job with that rank's message instead of leaving the others waiting.
void init();
bool is_initialized();
int rank();         // 0 ... world_size() - 1; 0 without init()
int world_size();   // 1 without init()
int local_rank();   // rank among the processes on this machine: the GPU a process should use
inline bool is_main_process() { return rank() == 0; }  // the one that prints and writes files

// How long a collective may wait for the other ranks before the job is aborted with an error
// naming it: EMBER_DISTRIBUTED_TIMEOUT seconds from the environment, 300 by default.
double timeout_seconds();

enum class ReduceOp { Sum, Mean };

// The result of a collective started without waiting. wait() returns once the tensor holds the
// result (for NCCL: once the result is queued on ember's current stream before any later work, and
// the communicator reported no error); test() makes progress and says whether it is done. Waiting
// longer than timeout_seconds() aborts the job.
class Work {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual bool test() = 0;
    virtual void wait() = 0;
  };
  Work() = default;
  explicit Work(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  bool test();
  void wait();
  bool defined() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<Impl> impl_;
};

// In place: every rank's tensor becomes the elementwise sum (or mean) over ranks. Sum of bool is
// logical or; Mean needs a floating dtype. The tensor must be contiguous.
void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
Work all_reduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
// In place: every rank's tensor becomes rank `root`'s.
void broadcast(const Tensor& tensor, int root = 0);
// Every rank's tensor, stacked along a new first dimension in rank order: [world_size, ...shape].
Tensor all_gather(const Tensor& tensor);
// Returns once every rank has called it.
void barrier();

// Ends the whole job now with `message` (printed by this rank) and a non-zero exit code. For a
// program that catches an error on one rank: returning normally would leave the others waiting in
// their next collective.
[[noreturn]] void abort(std::string_view message, int exit_code = 1);

}  // namespace ember::distributed
