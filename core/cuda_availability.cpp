// What a CPU-only build answers about GPUs; with the CUDA backend compiled in, cuda/runtime/device.cpp
// and cuda/runtime/caching_allocator.cpp answer instead. The summary's wording is shared by both.
#include "core/cuda.h"
#include "core/cuda_graph.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ember::cuda {

namespace {
std::string mebibytes(int64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }
}  // namespace

std::string memory_summary(int device) {
  const MemoryStats stats = memory_stats(device);
  return fmt::format("cuda:{}: allocated {} (peak {}), reserved {}, {} cudaMalloc, {} cudaFree", device,
                     mebibytes(stats.allocated_bytes), mebibytes(stats.peak_allocated_bytes),
                     mebibytes(stats.reserved_bytes), stats.cuda_malloc_calls, stats.cuda_free_calls);
}

#ifndef EMBER_WITH_CUDA
int device_count() { return 0; }
void set_allow_tf32(bool) {}
bool allow_tf32() { return false; }
void check_device(int index) {
  fail("cuda:{}: this build of ember has no CUDA backend (it was compiled without nvcc); check "
       "ember::cuda::is_available() before asking for a GPU", index);
}
void synchronize() {}
int64_t host_synchronizations() { return 0; }
int64_t cublas_calls() { return 0; }
MemoryStats memory_stats(int) { return {}; }
void reset_peak_memory_stats(int) {}
void empty_cache() {}

struct CudaGraph::State {};
CudaGraph::CudaGraph() : state_(std::make_unique<State>()) {}
CudaGraph::~CudaGraph() = default;
bool CudaGraph::is_captured() const { return false; }
void CudaGraph::capture(const std::function<void()>&, int device) {
  fail("CudaGraph::capture on cuda:{}: this build of ember has no CUDA backend (it was compiled without nvcc)",
       device);
}
void CudaGraph::replay() { fail("CudaGraph::replay: nothing captured; call capture(step) first"); }
bool is_capturing_graph() { return false; }
#endif

}  // namespace ember::cuda
