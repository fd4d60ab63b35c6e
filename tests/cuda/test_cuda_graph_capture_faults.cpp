// What a CUDA graph capture must survive or refuse (core/cuda_graph.h, cuda/graph/graph.cpp):
//   - its own first allocations, which reach cudaMalloc because the graph's pool starts empty,
//     and a process whose first matrix product is inside the capture (cuBLAS set up before it);
//   - an out-of-memory inside the capture, reported without returning the cache to the driver;
//   - host waits inside the step (item(), cpu(), uploads, synchronize), refused by ember itself;
//   - a step that fails: gradients, the optimizer's captured mark and GraphedSteps' inputs are
//     put back, so that the next capture starts clean;
//   - an optimizer whose step was captured: replacing its state tensors is refused.
// This file is its own process, so that its first case runs before any cuBLAS handle exists.
#include <memory>
#include <span>
#include <vector>

#include "helpers.h"
#include "parity.h"

namespace ember::testing::cuda {
namespace {

// Must stay the first case of the file: it needs a process in which no product has run yet.
TEST_CASE("a process whose first matrix product is captured: cuBLAS is set up before the capture") {
  const bool fresh = ember::cuda::cublas_calls() == 0;
  if (!fresh) MESSAGE("a product ran before this case: cuBLAS's handle already existed");
  const Tensor x = randn({32, 16}).to(kGPU), w = randn({16, 8}).to(kGPU);
  Tensor product;
  ember::cuda::CudaGraph graph;
  graph.capture([&] { product = matmul(x, w); });
  graph.replay();
  check_parity(product, matmul(x.cpu(), w.cpu()), kReductionTolerance, "captured first product");
}

TEST_CASE("a capture's first allocations reach cudaMalloc from an empty private pool, and the replay uses them") {
  const Tensor x = randn({257, 129}).to(kGPU);  // sizes no other case allocates
  const int64_t mallocs = ember::cuda::memory_stats().cuda_malloc_calls;
  Tensor result;
  ember::cuda::CudaGraph graph;
  graph.capture([&] { result = mul(gelu(x), 3.0); });
  CHECK(ember::cuda::memory_stats().cuda_malloc_calls > mallocs);  // the pool's blocks, made during the capture
  graph.replay();
  check_parity(result, mul(gelu(x.cpu()), 3.0), kElementwiseTolerance, "replayed step");
}

TEST_CASE("an out-of-memory inside a capture is reported, without returning the cache to the driver") {
  (void)randn({1024}).to(kGPU);  // something in the shared cache
  const int64_t frees = ember::cuda::memory_stats().cuda_free_calls;
  ember::cuda::CudaGraph graph;
  CHECK_THROWS_WITH_AS(graph.capture([] { (void)empty({int64_t{1} << 48}, TensorOptions().device(kGPU)); }),
                       doctest::Contains("while a CUDA graph was captured"), Error);
  CHECK(ember::cuda::memory_stats().cuda_free_calls == frees);
  CHECK_FALSE(graph.is_captured());
  CHECK_FALSE(ember::cuda::is_capturing_graph());
  const Tensor y = randn({64}).to(kGPU);  // ordinary work runs on
  CHECK(sum(y).item<double>() == doctest::Approx(sum(y.cpu()).item<double>()).epsilon(1e-5));
}

TEST_CASE("host waits inside a captured step are refused by name, and nothing is left behind") {
  const Tensor x = randn({8}).to(kGPU);
  const Tensor host = randn({8});
  const std::vector<std::pair<const char*, std::function<void()>>> waits = {
      {"item()", [&] { (void)sum(x).item<double>(); }},
      {"cpu()", [&] { (void)x.cpu(); }},
      {"an upload", [&] { (void)host.to(kGPU); }},
      {"copy_ from host memory", [&] { Tensor(x).copy_(host); }},
      {"synchronize()", [] { ember::cuda::synchronize(); }},
  };
  for (const auto& [name, wait] : waits) {
    CAPTURE(name);
    ember::cuda::CudaGraph graph;
    CHECK_THROWS_WITH_AS(graph.capture(wait), doctest::Contains("CUDA graph"), Error);
    CHECK_FALSE(graph.is_captured());
    CHECK_FALSE(ember::cuda::is_capturing_graph());
  }
  CHECK(sum(x).item<double>() == doctest::Approx(sum(x.cpu()).item<double>()).epsilon(1e-5));
}

struct Parameters {
  Tensor weight = randn({4, 3}).to(kGPU).requires_grad_(true);
  Tensor bias = randn({3}).to(kGPU).requires_grad_(true);
  std::vector<Tensor> all() const { return {weight, bias}; }
};

TEST_CASE("a capture that fails gives back the gradients and the optimizer's state as they were") {
  Parameters p;
  nn::SGD optimizer(p.all(), {.lr = 0.1, .momentum = 0.9});
  const Tensor x = randn({5, 4}).to(kGPU);
  const auto backward = [&] { sum(add(matmul(x, p.weight), p.bias)).backward(); };
  backward();
  optimizer.step();  // the warm-up: makes the momentum buffers
  const Tensor weight_grad = p.weight.grad(), bias_grad = p.bias.grad();

  ember::cuda::CudaGraph failed;
  CHECK_THROWS_WITH_AS(failed.capture([&] {
    backward();
    optimizer.step();
    throw Error("the step failed");
  }), doctest::Contains("the step failed"), Error);
  // The gradients are the warm-up's tensors, not ones in the dropped graph's memory.
  CHECK(p.weight.grad().data_ptr<float>() == weight_grad.data_ptr<float>());
  CHECK(p.bias.grad().data_ptr<float>() == bias_grad.data_ptr<float>());
  // No graph holds the optimizer: every hyper-parameter may change, its state may be replaced.
  optimizer.set_option(0, "momentum", 0.5);
  optimizer.load_state_dict(optimizer.state_dict());
  optimizer.to_parameter_devices();

  // A capture that succeeds after it records one step with the new momentum.
  ember::cuda::CudaGraph graph;
  graph.capture([&] {
    optimizer.zero_grad();
    backward();
    optimizer.step();
  });
  CHECK(graph.is_captured());
}

TEST_CASE("once a step is captured, the optimizer refuses to replace the state tensors the graph updates") {
  Parameters p;
  nn::AdamW optimizer(p.all(), {.lr = 0.01});
  const Tensor x = randn({5, 4}).to(kGPU);
  const auto step = [&] {
    optimizer.zero_grad();
    sum(add(matmul(x, p.weight), p.bias)).backward();
    optimizer.step();
  };
  step();
  const nn::StateDict saved = optimizer.state_dict();
  ember::cuda::CudaGraph graph;
  graph.capture(step);
  CHECK_THROWS_WITH_AS(optimizer.load_state_dict(saved), doctest::Contains("captured in a CUDA graph"), Error);
  CHECK_THROWS_WITH_AS(optimizer.to_parameter_devices(), doctest::Contains("captured in a CUDA graph"), Error);
  graph.replay();  // the graph still updates the state it recorded
  optimizer.set_lr(0, 0.005);
  graph.replay();
  CHECK(std::isfinite(sum(p.weight).item<double>()));
}

TEST_CASE("GraphedSteps: a capture that fails once is retried cleanly on the next batch of that shape") {
  manual_seed(11);
  Parameters p;
  nn::SGD optimizer(p.all(), {.lr = 0.05});
  bool fail_next = false;
  train::GraphedSteps steps([&](std::span<const Tensor> batch) {
    optimizer.zero_grad();
    Tensor loss = sum(mul(add(matmul(batch[0], p.weight), p.bias), add(matmul(batch[0], p.weight), p.bias)));
    loss.backward();
    optimizer.step();
    if (fail_next) {
      fail_next = false;
      throw Error("the step failed");
    }
    return loss;
  });
  const Tensor batch = randn({6, 4}).to(kGPU);
  (void)steps({batch}).item<double>();  // warm-up, op by op
  fail_next = true;
  CHECK_THROWS_WITH_AS(steps({batch}), doctest::Contains("the step failed"), Error);
  CHECK(steps.graphs() == 0);
  // The weights the failed capture would have updated are untouched: it recorded, never ran.
  const std::vector<double> before = p.weight.cpu().to_vector<double>();
  const double loss = steps({batch}).item<double>();
  CHECK(steps.last_run() == train::StepRun::kCaptured);
  CHECK(steps.graphs() == 1);
  CHECK(std::isfinite(loss));
  CHECK(p.weight.cpu().to_vector<double>() != before);  // the captured step's replay trained
}

}  // namespace
}  // namespace ember::testing::cuda
