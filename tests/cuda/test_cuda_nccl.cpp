// The NCCL backend on one GPU (world size 1, as a single process started without mpirun): each
// collective leaves the tensor as the one rank's sum, mean or copy, and DDP on CUDA takes the very
// step the model takes alone. Several GPUs are needed to see data move; this checks the path runs.
#include <cmath>

#include "helpers.h"
#include "parity.h"

using namespace ember;
using namespace ember::testing;
using namespace ember::testing::cuda;

namespace {
bool nccl_ready() {
  if (!distributed::has_backend(distributed::Backend::NCCL)) {
    MESSAGE("skipped: this build of ember has no NCCL");
    return false;
  }
  distributed::init();
  return true;
}
}  // namespace

TEST_CASE("NCCL all_reduce, broadcast and all_gather on one rank, every dtype") {
  if (!nccl_ready()) return;
  REQUIRE(distributed::world_size() == 1);
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBool}) {
    CAPTURE(dtype_name(dtype));
    const Tensor host = tensor({1.0, 0.0, 3.0, 1.0}, {2, 2}).to(dtype);
    Tensor x = host.to(kGPU);
    distributed::all_reduce(x);
    distributed::broadcast(x, 0);
    CHECK(x.cpu().to(kFloat64).to_vector<double>() == host.to(kFloat64).to_vector<double>());
    Tensor gathered = distributed::all_gather(x);
    CHECK(gathered.sizes() == Shape{1, 2, 2});
    CHECK(gathered.device() == x.device());
  }
  Tensor y = tensor({2.0, 4.0}, {2}).to(kGPU);
  distributed::all_reduce(y, distributed::ReduceOp::Mean);
  CHECK(y.cpu().to_vector<float>() == std::vector<float>{2.0f, 4.0f});
  Tensor empty_tensor = zeros({0}, kGPU);
  distributed::all_reduce(empty_tensor);
  Tensor large = ones({1 << 22}, kGPU);
  distributed::all_reduce_async(large).wait();
  CHECK(large.sum().item() == double(1 << 22));
}

TEST_CASE("DDP on one GPU takes the step the model takes alone") {
  if (!nccl_ready()) return;
  manual_seed(3);
  auto model = std::make_shared<nn::Linear>(16, 4);
  model->to(kGPU);
  auto alone = std::make_shared<nn::Linear>(16, 4);
  alone->to(kGPU);
  alone->load_state_dict(model->state_dict());
  nn::DistributedDataParallel ddp(model, {.bucket_cap_bytes = 128});
  const Tensor x = randn({8, 16}, kGPU);
  model->forward(x).pow(2.0).sum().backward();
  alone->forward(x).pow(2.0).sum().backward();
  check_close(model->weight.grad().cpu(), alone->weight.grad().cpu(), 1e-6, 1e-6);
  check_close(model->bias.grad().cpu(), alone->bias.grad().cpu(), 1e-6, 1e-6);
  CHECK(ddp.stats().steps == 1);
}
