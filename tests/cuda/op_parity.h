// Runs one op, forward and backward, on the CPU and on CUDA with the same inputs, and compares
// the outputs and every input's gradient with tests/cuda/parity.h. The op is a function of
// its inputs, so the same code runs on both devices.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "parity.h"

namespace ember::testing::cuda {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Forward parity under `tolerance`; when the output requires grad, backward from the same
// random output gradient and parity of each input's gradient (a product's backward is a
// product, so gradients use the reduction tolerance or the given one, whichever is larger).
// The check itself is parity.h's check_op_parity.
inline void check_op(const std::string& what, const std::vector<Tensor>& cpu_inputs, const OpFn& fn,
                     double tolerance) {
  check_op_parity(fn, cpu_inputs, tolerance, what, std::max(tolerance, kReductionTolerance));
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
