// The GPU as the user sees it: whether one is there, the caching allocator's memory
// statistics, and waiting for queued work. In a CPU-only build every query answers "no GPU"
// (core/cuda_availability.cpp); with the CUDA backend, cuda/ answers.
#pragma once

#include <cstdint>
#include <string>

namespace ember::cuda {

// Number of CUDA devices ember can use: 0 in a CPU-only build or on a machine without a GPU.
int device_count();
inline bool is_available() { return device_count() > 0; }

// Whether float32 matrix products on CUDA may use TF32 tensor cores: much faster, but their
// inputs are rounded to 10 mantissa bits, so results no longer match the CPU's closely. Off by
// default; a no-op without the CUDA backend.
void set_allow_tf32(bool allow);
bool allow_tf32();

// Allows or forbids TF32 for the scope's lifetime, then restores the setting (for benchmarks and
// tests that time or check both in one process).
class AllowTf32Scope {
 public:
  explicit AllowTf32Scope(bool allow) : before_(allow_tf32()) { set_allow_tf32(allow); }
  ~AllowTf32Scope() { set_allow_tf32(before_); }
  AllowTf32Scope(const AllowTf32Scope&) = delete;
  AllowTf32Scope& operator=(const AllowTf32Scope&) = delete;

 private:
  bool before_;
};

// Throws ember::Error naming the device unless cuda:`index` exists on this machine. The CUDA
// allocator calls it before touching the GPU, so asking for a CUDA tensor without a GPU fails
// clearly.
void check_device(int index);

// Blocks until every kernel and copy queued on the GPU has finished (for timing; item() and
// cpu() wait by themselves). Does nothing without a GPU.
void synchronize();

// How many times the host has waited for the GPU so far: copies to the host (item(), cpu(),
// to_vector()), copies from host memory to the GPU, and synchronize(). A warm training step on
// tensors already on the GPU adds none until its loss is read. 0 without the CUDA backend.
int64_t host_synchronizations();

// How many cuBLAS calls ember has made so far (one per matrix product, whatever its batch
// layout): a warm training step makes a fixed number, which the CUDA suites check. 0 without
// the CUDA backend.
int64_t cublas_calls();

// What the caching allocator holds on one device, in bytes of its rounded blocks.
struct MemoryStats {
  int64_t allocated_bytes = 0;       // held by live tensors
  int64_t reserved_bytes = 0;        // obtained from cudaMalloc: allocated plus cached for reuse
  int64_t peak_allocated_bytes = 0;  // the most allocated at once since the start or reset_peak
  int64_t cuda_malloc_calls = 0;     // cudaMalloc calls so far: a warm training step adds none
  int64_t cuda_free_calls = 0;       // cudaFree calls so far (empty_cache, out-of-memory retries)
};
// Zeros for a device never used, and in a CPU-only build.
MemoryStats memory_stats(int device = 0);
// "allocated 12.0 MiB (peak 40.5 MiB), reserved 64.0 MiB, 17 cudaMalloc, 0 cudaFree"
std::string memory_summary(int device = 0);
void reset_peak_memory_stats(int device = 0);
// Returns the cached (unused) blocks of every device to the driver.
void empty_cache();

}  // namespace ember::cuda
