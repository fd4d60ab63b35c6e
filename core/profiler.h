// Where a training step spends its time: every kernel launched through a dispatch table is
// timed while the profiler is on, and the times are summed per op ("matmul", "softmax",
// "layer_norm_backward", ...). matmul also counts its floating-point operations, so the
// report gives the GFLOP/s reached inside the step, to set beside the machine's BLAS ceiling.
//
//   ember::profiler::start();
//   for (int i = 0; i < 10; ++i) train_step();
//   for (const auto& op : ember::profiler::stop()) fmt::print("{} {:.1f} ms\n", op.name, op.seconds * 1e3);
//
// Off, it costs one branch per kernel call. Only the outermost kernel is timed when a kernel
// calls another, so the times add up to no more than the wall time. Kernels on the CPU run to
// completion before they return, so the clock measures them; CUDA kernels are asynchronous,
// so while profiling each one is waited for before and after it runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::profiler {

struct OpTime {
  std::string name;
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;  // counted by ops that know theirs (matmul); 0 otherwise
};

// Starts a profile (clearing the last one).
void start();
// Ends it and returns the ops by total time, largest first.
std::vector<OpTime> stop();
bool is_on();

// Adds floating-point operations to `op`'s count while profiling.
void add_flops(std::string_view op, double flops);

namespace detail {
extern bool on;
extern int depth;
void record(std::string_view op, double seconds);
void wait_for_gpu();  // ember::cuda::synchronize()
}  // namespace detail

// Times one kernel call; used by the dispatch tables, not by hand: construct it, call the
// kernel, then stop(). A GPU kernel is waited for before the clock starts and again before it
// stops, so its time is the GPU's (and a profiled step runs slower than an unprofiled one).
class KernelTimer {
 public:
  // The depth is raised only once the wait has returned: a wait that throws (an error a GPU
  // kernel found earlier) leaves no destructor to lower it again.
  KernelTimer(std::string_view op, bool on_gpu) : op_(op), on_gpu_(on_gpu), outermost_(detail::depth == 0) {
    if (outermost_ && on_gpu_) detail::wait_for_gpu();
    ++detail::depth;
    if (outermost_) start_ = std::chrono::steady_clock::now();
  }
  void stop() {
    if (!outermost_) return;
    if (on_gpu_) detail::wait_for_gpu();
    detail::record(op_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  // A kernel that throws is not recorded.
  ~KernelTimer() { --detail::depth; }
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  std::string_view op_;
  bool on_gpu_;
  bool outermost_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ember::profiler
