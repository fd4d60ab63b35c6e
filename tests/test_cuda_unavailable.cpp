// Without a GPU (this machine, CI): the CUDA API answers "none" and every request for CUDA
// memory throws an ember::Error that names the device, before any CUDA call can fail
// obscurely. (An empty CUDA tensor needs no memory and exists anywhere, as tests/test_elementwise
// relies on.) With a GPU present these checks do not apply and the suite says so.
#include "helpers.h"

using namespace ember;

TEST_CASE("without a GPU, CUDA tensors are refused with a clear ember::Error") {
  if (cuda::is_available()) {
    MESSAGE("a GPU is present: tests/cuda covers it");
    return;
  }
  CHECK(cuda::device_count() == 0);
  CHECK_THROWS_AS(zeros({2}, Device::cuda()), Error);
  CHECK_THROWS_WITH_ALL(zeros({2}, Device::cuda()), "cuda:0", "no CUDA", "is_available()");
  CHECK_THROWS_WITH_ALL(randn({3}, Device::cuda(2)), "cuda:2", "no CUDA");
  CHECK_THROWS_WITH_ALL(tensor({1.f, 2.f}).to(Device::cuda()), "cuda:0", "no CUDA");
  CHECK_THROWS_WITH_ALL(cuda::check_device(0), "cuda:0", "no CUDA");
}

TEST_CASE("without a GPU, memory statistics are zeros and synchronize and empty_cache do nothing") {
  if (cuda::is_available()) {
    MESSAGE("a GPU is present: tests/cuda covers it");
    return;
  }
  const cuda::MemoryStats stats = cuda::memory_stats();
  CHECK(stats.allocated_bytes == 0);
  CHECK(stats.reserved_bytes == 0);
  CHECK(stats.peak_allocated_bytes == 0);
  CHECK(stats.cuda_malloc_calls == 0);
  CHECK_NOTHROW(cuda::synchronize());
  CHECK(cuda::host_synchronizations() == 0);
  CHECK_NOTHROW(cuda::empty_cache());
  CHECK_NOTHROW(cuda::reset_peak_memory_stats());
  CHECK(cuda::memory_summary() == "cuda:0: allocated 0.0 MiB (peak 0.0 MiB), reserved 0.0 MiB, 0 cudaMalloc, 0 cudaFree");
}

TEST_CASE("without a GPU, a CUDA graph cannot capture, and a replay with nothing captured says so") {
  cuda::CudaGraph graph;
  CHECK_FALSE(graph.is_captured());
  CHECK_FALSE(cuda::is_capturing_graph());
  CHECK_THROWS_WITH_ALL(graph.replay(), "CudaGraph::replay", "nothing captured");
  if (cuda::is_available()) {
    MESSAGE("a GPU is present: tests/cuda/test_cuda_graphs.cpp covers capture");
    return;
  }
  bool ran = false;
  CHECK_THROWS_WITH_ALL(graph.capture([&] { ran = true; }), "cuda:0", "no CUDA");
  CHECK_FALSE(ran);  // refused before the step could run uncaptured
  CHECK_FALSE(cuda::is_capturing_graph());
  // Optimizers step as usual outside a capture.
  Tensor w = ones({2});
  w.requires_grad_(true);
  w.mutable_grad() = ones({2});
  nn::SGD optimizer({w}, {.lr = 0.5});
  optimizer.step();
  CHECK(w.to_vector<float>() == std::vector<float>{0.5f, 0.5f});
}
