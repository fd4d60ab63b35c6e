// The parity harness: the same op on the CPU and on CUDA, with the same random inputs, compared
// by relative error ||gpu - cpu|| / ||cpu||. Inputs are drawn fresh each run (the seed comes
// from the clock and is printed on failure), and outputs the CUDA kernels write into are
// poisoned first, so an element a kernel forgets to write shows up as NaN.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
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

}  // namespace ember::testing::cuda
