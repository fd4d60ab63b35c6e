// The CUDA runtime pieces: the caching allocator (reuse, statistics, empty_cache), copies
// between host and device in every direction and layout, same-seed random draws on both
// devices, item() and printing of GPU tensors, and the errors of bad devices.
#include <algorithm>
#include <sstream>

#include "helpers.h"
#include "parity.h"

using namespace ember;
using namespace ember::testing::cuda;

namespace {

// A small forward and backward pass: what a training step does to the allocator.
double small_step(const Tensor& w) {
  const Tensor x = randn({64, 32}, kGPU);
  const Tensor loss = tanh(mul(x, w) + 1.0).sum();
  loss.backward();
  return loss.item();
}

}  // namespace

TEST_CASE("the caching allocator reuses freed blocks: a repeated step makes no cudaMalloc") {
  Tensor w = randn({64, 32}, kGPU);
  w.requires_grad_(true);
  small_step(w);  // warm: fills the cache
  w.mutable_grad() = Tensor();
  small_step(w);
  const int64_t mallocs = ember::cuda::memory_stats().cuda_malloc_calls;
  for (int step = 0; step < 5; ++step) {
    w.mutable_grad() = Tensor();
    small_step(w);
  }
  CHECK(ember::cuda::memory_stats().cuda_malloc_calls == mallocs);
}

TEST_CASE("memory statistics follow allocations, frees, reset_peak and empty_cache") {
  ember::cuda::synchronize();
  ember::cuda::empty_cache();
  const ember::cuda::MemoryStats start = ember::cuda::memory_stats();
  CHECK(start.reserved_bytes == start.allocated_bytes);  // nothing cached after empty_cache
  constexpr int64_t kBytes = 4 << 20;
  {
    const Tensor big = empty({kBytes / 4}, kGPU);
    const ember::cuda::MemoryStats held = ember::cuda::memory_stats();
    CHECK(held.allocated_bytes >= start.allocated_bytes + kBytes);
    CHECK(held.peak_allocated_bytes >= held.allocated_bytes);
    CHECK(held.reserved_bytes >= held.allocated_bytes);
    CHECK(held.cuda_malloc_calls == start.cuda_malloc_calls + 1);
  }
  const ember::cuda::MemoryStats freed = ember::cuda::memory_stats();
  CHECK(freed.allocated_bytes == start.allocated_bytes);
  CHECK(freed.reserved_bytes >= start.reserved_bytes + kBytes);  // kept in the cache
  CHECK(freed.peak_allocated_bytes >= start.allocated_bytes + kBytes);
  {
    const Tensor again = empty({kBytes / 4}, kGPU);  // the cached block, no cudaMalloc
    CHECK(ember::cuda::memory_stats().cuda_malloc_calls == freed.cuda_malloc_calls);
  }
  ember::cuda::reset_peak_memory_stats();
  CHECK(ember::cuda::memory_stats().peak_allocated_bytes == ember::cuda::memory_stats().allocated_bytes);
  ember::cuda::empty_cache();
  const ember::cuda::MemoryStats emptied = ember::cuda::memory_stats();
  CHECK(emptied.reserved_bytes == emptied.allocated_bytes);
  CHECK(emptied.cuda_free_calls > freed.cuda_free_calls);
  const std::string summary = ember::cuda::memory_summary();
  CHECK(summary.find("cuda:0") != std::string::npos);
  CHECK(summary.find("cudaMalloc") != std::string::npos);
}

TEST_CASE("an allocation larger than the GPU throws an ember::Error naming the size and the memory held") {
  const int64_t huge = int64_t{1} << 50;  // 1 PiB of float32
  const std::string bytes = std::to_string(huge * 4);
  CHECK_THROWS_WITH_ALL(empty({huge}, kGPU), "out of memory", "cuda:0", bytes.c_str());
  // The allocator is still usable afterwards.
  CHECK(ones({3}, kGPU).sum().item() == 3.0);
}

TEST_CASE("copies round-trip between host and device for every dtype and layout") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  manual_seed(seed);
  const Tensor values = randn({5, 7});
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBool}) {
    const Tensor host = dtype == kBool ? gt(values, 0.0) : mul(values, 10.0).to(dtype);
    const Tensor device = host.to(kGPU);
    CHECK(device.is_cuda());
    CHECK(device.dtype() == dtype);
    CHECK(device.cpu().to_vector<double>() == host.to_vector<double>());
    // Non-contiguous on either side, and a dtype change on the GPU.
    CHECK(host.t().to(kGPU).cpu().to_vector<double>() == host.t().contiguous().to_vector<double>());
    CHECK(device.t().cpu().to_vector<double>() == host.t().contiguous().to_vector<double>());
    CHECK(device.t().contiguous().cpu().to_vector<double>() == host.t().contiguous().to_vector<double>());
    CHECK(device.clone().cpu().to_vector<double>() == host.to_vector<double>());
    CHECK(device.to(kFloat64).cpu().to_vector<double>() == host.to(kFloat64).to_vector<double>());
    CHECK(device.slice(1, 1, 6, 2).cpu().to_vector<double>() == host.slice(1, 1, 6, 2).contiguous().to_vector<double>());
  }
}

TEST_CASE("copy_ broadcasts across devices, and cat writes its windows on the GPU") {
  Tensor target = zeros({3, 4}, kGPU);
  target.copy_(tensor({1.f, 2.f, 3.f, 4.f}));  // host row broadcast into a GPU matrix
  CHECK(target.cpu().to_vector<float>() == std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
  Tensor column = target.narrow(1, 1, 2);  // a strided GPU window
  column.copy_(full({3, 1}, 9.0, kGPU));
  CHECK(target.cpu().to_vector<float>() == std::vector<float>{1, 9, 9, 4, 1, 9, 9, 4, 1, 9, 9, 4});
  Tensor host = zeros({4, 3});
  host.t().copy_(target);  // a GPU tensor into a strided host view
  CHECK(host.t().contiguous().to_vector<float>() == target.cpu().to_vector<float>());

  const Tensor a = randn({2, 3}), b = randn({2, 5});
  check_parity(cat({a.to(kGPU), b.to(kGPU)}, 1), cat({a, b}, 1), 0.0, "cat");
  check_parity(stack({a.to(kGPU), a.to(kGPU)}, 0), stack({a, a}, 0), 0.0, "stack");
}

TEST_CASE("item, to_vector and printing read GPU tensors through the host") {
  const Tensor x = tensor({1.5f, -2.f, 3.f}).to(kGPU);
  CHECK(x.sum().item() == doctest::Approx(2.5));
  CHECK(x.select(0, 1).item<float>() == -2.f);
  CHECK(x.to_vector<float>() == std::vector<float>{1.5f, -2.f, 3.f});
  std::ostringstream printed;
  printed << x;
  CHECK(printed.str().find("device=cuda:0") != std::string::npos);
  CHECK(printed.str().find("1.5") != std::string::npos);
}

TEST_CASE("after manual_seed the GPU draws the CPU's random numbers") {
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  for (DType dtype : {kFloat32, kFloat64}) {
    manual_seed(seed);
    const Tensor cpu_uniform = rand({1001}, dtype), cpu_normal = randn({37, 3}, dtype);
    const Tensor cpu_int = randint(-5, 1000, {513});
    manual_seed(seed);
    const Tensor gpu_uniform = rand({1001}, TensorOptions(dtype).device(kGPU));
    const Tensor gpu_normal = randn({37, 3}, TensorOptions(dtype).device(kGPU));
    const Tensor gpu_int = randint(-5, 1000, {513}, TensorOptions(kInt64).device(kGPU));
    CHECK(gpu_uniform.cpu().to_vector<double>() == cpu_uniform.to_vector<double>());
    check_parity(gpu_normal, cpu_normal, 1e-6, "randn");
    CHECK(gpu_int.cpu().to_vector<int64_t>() == cpu_int.to_vector<int64_t>());
  }
  // Both devices compute element i of arange as fma(i, step, start), one IEEE operation rounded
  // once (core/ops/factory.cpp, cuda/ops/factory.cu), so they agree to the bit: tolerance 0. A
  // multiply then an add, which g++ contracts into an FMA on some targets only, differs from it
  // in the last bit of 12 of these 40 float64 elements (relative error 5.2e-17).
  check_parity(arange(2.0, 50.0, 0.37, kGPU), arange(2.0, 50.0, 0.37), 0.0, "arange float32");
  check_parity(arange(1.0, -3.0, -0.1, TensorOptions(kFloat64).device(kGPU)), arange(1.0, -3.0, -0.1, kFloat64), 0.0,
               "arange float64, descending");
  CHECK(arange(-3.0, 90.0, 7.0, TensorOptions(kInt64).device(kGPU)).cpu().to_vector<int64_t>() ==
        arange(-3.0, 90.0, 7.0, kInt64).to_vector<int64_t>());
  check_parity(full({4, 5}, 2.25, kGPU), full({4, 5}, 2.25), 0.0, "full");
}

TEST_CASE("bad devices and mixed devices throw ember::Errors that name them") {
  const int count = ember::cuda::device_count();
  const std::string beyond = "cuda:" + std::to_string(count);
  CHECK_THROWS_WITH_ALL(zeros({2}, Device::cuda(count)), beyond.c_str(), "no such CUDA device");
  CHECK_THROWS_WITH_ALL(ones({2}).to(Device::cuda(-1)), "cuda:-1");
  CHECK_THROWS_WITH_ALL(add(ones({2}), ones({2}, kGPU)), "add", "device mismatch");
  CHECK_NOTHROW(ember::cuda::synchronize());
}

TEST_CASE("an id, target or index out of range on the GPU throws the CPU's error at the next wait, not before") {
  const Tensor weight = randn({5, 3}, kGPU);
  const Tensor bad_ids = tensor<int64_t>({1, 7, 2}, {3}).to(kGPU);
  // The check is queued on the GPU: the op itself returns, and the error comes when the host
  // next waits for the GPU, with the message the CPU gives at once.
  Tensor rows;
  CHECK_NOTHROW(rows = embedding(weight, bad_ids));
  CHECK_THROWS_WITH_ALL(rows.cpu(), "embedding: id 7 (at flat position 1) is out of range for 5 embeddings",
                        "found on the GPU");
  // Reported once: the next wait is clean, and the GPU is still usable.
  CHECK_NOTHROW(ember::cuda::synchronize());
  CHECK(embedding(weight, tensor<int64_t>({4, 0}, {2}).to(kGPU)).cpu().sizes() == Shape{2, 3});

  const Tensor logits = randn({3, 4}, kGPU);
  CHECK_THROWS_WITH_ALL(cross_entropy(logits, tensor<int64_t>({0, 4, 1}, {3}).to(kGPU)).item<double>(),
                        "cross_entropy: target 4 (at flat position 1) is out of range for 4 classes");
  // ignore_index lets its value through even though it is out of range.
  CHECK(std::isfinite(cross_entropy(logits, tensor<int64_t>({0, -100, 1}, {3}).to(kGPU)).item<double>()));
  CHECK_THROWS_WITH_ALL(nn::nll_loss(log_softmax(logits, -1), tensor<int64_t>({0, 1, -3}, {3}).to(kGPU)).item<double>(),
                        "nll_loss: target -3 (at flat position 2) is out of range for 4 classes");
  CHECK_THROWS_WITH_ALL(gather(logits, 1, tensor<int64_t>({0, 9}, {1, 2}).to(kGPU)).cpu(),
                        "gather: index 9 (at flat position 1) is out of range for dim 1 of size 4");
  CHECK_THROWS_WITH_ALL(index_select(logits, 0, tensor<int64_t>({3}, {1}).to(kGPU)).cpu(),
                        "index_select: index 3 (at flat position 0) is out of range for dim 0 of size 3");
  // A bad id in a backward pass: the scatter skips it, and the forward's check reports it.
  Tensor table = randn({5, 3}, kGPU);
  table.requires_grad_(true);
  const Tensor loss = embedding(table, bad_ids).sum();
  loss.backward();
  CHECK_THROWS_WITH_ALL(table.grad().cpu(), "embedding: id 7");
  CHECK_NOTHROW(ember::cuda::synchronize());
}

TEST_CASE("the profiler times GPU kernels: it waits for each, so its time is the GPU's") {
  const Tensor a = randn({512, 512}, kGPU), b = randn({512, 512}, kGPU);
  ember::cuda::synchronize();
  const int64_t waits = ember::cuda::host_synchronizations();
  profiler::start();
  const Tensor c = matmul(a, b);
  const std::vector<profiler::OpTime> ops = profiler::stop();
  // Two waits per kernel: before the clock starts and before it stops.
  int64_t calls = 0;
  for (const profiler::OpTime& op : ops) calls += op.calls;
  CHECK(ember::cuda::host_synchronizations() - waits == 2 * calls);
  const auto matmul_time = std::find_if(ops.begin(), ops.end(), [](const auto& op) { return op.name == "matmul"; });
  REQUIRE(matmul_time != ops.end());
  CHECK(matmul_time->calls == 1);
  CHECK(matmul_time->seconds > 0);
  CHECK(matmul_time->flops == doctest::Approx(2.0 * 512 * 512 * 512));
  CHECK(c.sizes() == Shape{512, 512});
}

TEST_CASE("an error reported while the profiler waits for the GPU leaves the profiler working") {
  const Tensor weight = randn({5, 3}, kGPU);
  ember::cuda::synchronize();
  const Tensor rows = embedding(weight, tensor<int64_t>({9}, {1}).to(kGPU));  // queues a failing check
  profiler::start();
  // The next profiled kernel waits for the GPU first, and that wait reports the bad id.
  CHECK_THROWS_WITH_ALL(exp(weight), "embedding: id 9");
  const Tensor later = exp(weight);
  const std::vector<profiler::OpTime> ops = profiler::stop();
  const auto exp_time = std::find_if(ops.begin(), ops.end(), [](const auto& op) { return op.name == "exp"; });
  REQUIRE(exp_time != ops.end());
  CHECK(exp_time->calls == 1);  // the later call was timed: it was the outermost kernel again
  CHECK(later.sizes() == Shape{5, 3});
}
