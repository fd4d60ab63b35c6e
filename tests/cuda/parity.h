// The parity harness: the same op on the CPU and on CUDA, with the same random inputs, compared
// by relative error ||gpu - cpu|| / ||cpu||. Inputs are drawn fresh each run (the seed comes
// from the clock and is printed on failure), and outputs the CUDA kernels write into are
// poisoned first, so an element a kernel forgets to write shows up as NaN.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ember.h"

namespace ember::testing::cuda {

inline const Device kGPU = Device::cuda(0);

// Relative error of `gpu` against `cpu`, both compared in float64 on the host. Shapes must
// match; any NaN where the CPU has none makes the error infinite.
inline double relative_error(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE_MESSAGE(gpu.sizes() == cpu.sizes(),
                  "shape " << shape_str(gpu.sizes()) << " != " << shape_str(cpu.sizes()));
  const std::vector<double> g = gpu.cpu().to_vector<double>();
  const std::vector<double> c = cpu.to_vector<double>();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::isnan(g[i]) != std::isnan(c[i])) return INFINITY;
    if (std::isnan(c[i]) || (std::isinf(c[i]) && g[i] == c[i])) continue;
    diff += (g[i] - c[i]) * (g[i] - c[i]);
    norm += c[i] * c[i];
  }
  if (norm == 0) return std::sqrt(diff);
  return std::sqrt(diff / norm);
}

// Tolerances of the issue: elementwise float32 ops, and reductions and products.
inline constexpr double kElementwiseTolerance = 1e-5;
inline constexpr double kReductionTolerance = 1e-4;

inline void check_parity(const Tensor& gpu, const Tensor& cpu, double tolerance, const std::string& what) {
  REQUIRE_MESSAGE(gpu.device().is_cuda(), what << ": result is on " << gpu.device().str());
  const double error = relative_error(gpu, cpu);
  CHECK_MESSAGE(error <= tolerance, what << ": relative error " << error << " > " << tolerance);
}

// A seed that differs from run to run; tests print it so a failure can be replayed.
inline uint64_t fresh_seed() {
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// A NaN-filled tensor on the GPU: the destination of an out-of-place kernel under test.
inline Tensor poisoned(const Shape& shape, DType dtype = kFloat32) {
  return full(shape, NAN, TensorOptions(dtype).device(kGPU));
}

// Runs `op` on CPU leaves and on GPU copies of them, compares the results, then backpropagates
// the same random upstream gradient on both devices and compares the gradient of every input
// that requires grad. `inputs` live on the CPU; pass views (transpose, expand) inside `op` to
// exercise non-contiguous and broadcast operands. Both devices get fresh leaves, so the same
// inputs can serve several checks without gradients piling up on one side. Gradients are
// compared under `gradient_tolerance` (negative: `tolerance`).
using Inputs = std::vector<Tensor>;
inline void check_op_parity(const std::function<Tensor(const Inputs&)>& op, const std::vector<Tensor>& inputs,
                            double tolerance, const std::string& what, double gradient_tolerance = -1) {
  if (gradient_tolerance < 0) gradient_tolerance = tolerance;
  std::vector<Tensor> cpu_inputs, gpu_inputs;
  for (const Tensor& input : inputs) {
    Tensor cpu_input = input.detach();
    Tensor gpu_input = input.detach().to(kGPU);
    if (input.requires_grad()) {
      cpu_input.requires_grad_(true);
      gpu_input.requires_grad_(true);
    }
    cpu_inputs.push_back(cpu_input);
    gpu_inputs.push_back(gpu_input);
  }
  const Tensor cpu_result = op(cpu_inputs);
  const Tensor gpu_result = op(gpu_inputs);
  check_parity(gpu_result, cpu_result, tolerance, what + " (forward)");
  if (!cpu_result.requires_grad()) return;
  REQUIRE_MESSAGE(gpu_result.requires_grad(), what << ": the CUDA result records no backward");
  const Tensor upstream = randn(cpu_result.sizes(), cpu_result.dtype());
  cpu_result.backward(upstream);
  gpu_result.backward(upstream.to(kGPU));
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].requires_grad()) continue;
    REQUIRE_MESSAGE(gpu_inputs[k].grad().defined(), what << ": input " << k << " got no gradient on the GPU");
    check_parity(gpu_inputs[k].grad(), cpu_inputs[k].grad(), gradient_tolerance,
                 what + " (gradient of input " + std::to_string(k) + ")");
  }
}

}  // namespace ember::testing::cuda
