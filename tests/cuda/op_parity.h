// Runs one op, forward and backward, on the CPU and on CUDA with the same inputs, and compares
// the outputs and every input's gradient with tests/cuda/parity.h. The op is a function of
// its inputs, so the same code runs on both devices.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "parity.h"

namespace ember::testing::cuda {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Copies of `inputs` on the GPU, requiring grad where the originals do.
inline std::vector<Tensor> on_gpu(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> copies;
  for (const Tensor& x : inputs) {
    Tensor copy = x.detach().to(kGPU);
    if (x.requires_grad()) copy.requires_grad_(true);
    copies.push_back(copy);
  }
  return copies;
}

// Forward parity under `tolerance`; when the output requires grad, backward from the same
// random output gradient and parity of each input's gradient (a product's backward is a
// product, so gradients use the reduction tolerance or the given one, whichever is larger).
inline void check_op(const std::string& what, const std::vector<Tensor>& cpu_inputs, const OpFn& fn,
                     double tolerance) {
  const std::vector<Tensor> gpu_inputs = on_gpu(cpu_inputs);
  const Tensor cpu_out = fn(cpu_inputs);
  const Tensor gpu_out = fn(gpu_inputs);
  check_parity(gpu_out, cpu_out, tolerance, what + " forward");
  if (!cpu_out.requires_grad()) return;
  REQUIRE_MESSAGE(gpu_out.requires_grad(), what << ": the CUDA output records no backward");
  const Tensor grad = randn(cpu_out.sizes(), cpu_out.options());
  cpu_out.backward(grad);
  gpu_out.backward(grad.to(kGPU));
  for (size_t i = 0; i < cpu_inputs.size(); ++i) {
    if (!cpu_inputs[i].requires_grad()) continue;
    REQUIRE_MESSAGE(gpu_inputs[i].grad().defined(), what << ": input " << i << " got no gradient on CUDA");
    check_parity(gpu_inputs[i].grad(), cpu_inputs[i].grad(), std::max(tolerance, kReductionTolerance),
                 what + " backward, input " + std::to_string(i));
  }
}

// A leaf of standard normal values that requires grad.
inline Tensor leaf(const Shape& shape, DType dtype = kFloat32) {
  return randn(shape, TensorOptions(dtype).requires_grad(true));
}

// Seeds the generator with a fresh seed, printed if the test fails.
inline uint64_t seed_fresh() {
  const uint64_t seed = fresh_seed();
  manual_seed(seed);
  return seed;
}

}  // namespace ember::testing::cuda
