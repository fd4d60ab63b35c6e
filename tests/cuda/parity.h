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

// Standard normal values of `dtype` on the CPU; a 16-bit tensor holds float32 draws rounded, so
// the suites need no 16-bit random kernel of the CPU.
inline Tensor random_normal(const Shape& shape, DType dtype) {
  return is_16_bit_floating_point(dtype) ? randn(shape).to(dtype) : randn(shape, dtype);
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
  const Tensor upstream = random_normal(cpu_result.sizes(), cpu_result.dtype());
  cpu_result.backward(upstream);
  gpu_result.backward(upstream.to(kGPU));
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].requires_grad()) continue;
    REQUIRE_MESSAGE(gpu_inputs[k].grad().defined(), what << ": input " << k << " got no gradient on the GPU");
    check_parity(gpu_inputs[k].grad(), cpu_inputs[k].grad(), gradient_tolerance,
                 what + " (gradient of input " + std::to_string(k) + ")");
  }
}

// --- bfloat16 and float16 ---------------------------------------------------------------------

inline constexpr DType kHalfDTypes[] = {kBFloat16, kFloat16};

// The unit roundoff of a 16-bit format, the largest relative error of one rounding to it:
// bfloat16 keeps 8 significant bits (2^-8), float16 11 (2^-11).
inline double unit_roundoff(DType dtype) { return dtype == kBFloat16 ? 0x1p-8 : 0x1p-11; }

// Tolerance for 16-bit results. Both devices compute each op in float32 and round once, so an
// element differs only where the two float32 values (summed in another order, or from CUDA's
// own exp and log) fall on either side of a rounding boundary: by one unit in the last place,
// at most 2 units roundoff relative to it, and in norm far less, as few elements do. Each 16-bit
// op a result passes through (`roundings`: a gradient is the work of several ops, each storing
// 16-bit intermediates) may add as much again.
inline double half_tolerance(DType dtype, int roundings = 1) { return 2.0 * roundings * unit_roundoff(dtype); }

// The 16-bit check of one op: `inputs` (CPU, float32 or integer) have their floating ones rounded
// to `dtype`; the op then runs in `dtype` on both devices, forward and backward, compared as
// check_op_parity does (gradients under `gradient_roundings` roundings); and the GPU's 16-bit
// result is compared with the float32 op on the GPU on the same rounded inputs, rounded to the
// result's dtype: the rule every 16-bit kernel follows, checked without the CPU's kernels. A
// kernel that rounds an intermediate to 16 bits too (tensor-core attention's weights) says so
// with `forward_roundings`.
inline void check_half_op_parity(const std::function<Tensor(const Inputs&)>& op, const std::vector<Tensor>& inputs,
                                 DType dtype, const std::string& what, int gradient_roundings = 3,
                                 int forward_roundings = 1) {
  const std::string name = what + " in " + std::string(dtype_name(dtype));
  std::vector<Tensor> rounded, narrow_gpu, wide_gpu;
  for (const Tensor& input : inputs) {
    const bool floating = is_floating_point(input.dtype());
    Tensor r = floating ? input.detach().to(dtype) : input.detach();
    if (input.requires_grad()) r.requires_grad_(true);
    rounded.push_back(r);
    narrow_gpu.push_back(r.detach().to(kGPU));
    wide_gpu.push_back(floating ? r.detach().to(kFloat32).to(kGPU) : r.detach().to(kGPU));
  }
  check_op_parity(op, rounded, half_tolerance(dtype, forward_roundings), name,
                  half_tolerance(dtype, gradient_roundings));
  const Tensor result = op(narrow_gpu);
  Tensor expected = op(wide_gpu);
  if (is_floating_point(expected.dtype())) expected = expected.to(result.dtype());
  check_parity(result, expected, half_tolerance(dtype, forward_roundings),
               name + " against float32 on the GPU, rounded");
}

}  // namespace ember::testing::cuda
