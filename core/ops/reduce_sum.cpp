// sum and mean, and any and all, which count with the sum kernel: the ops, their backward,
// and the CPU sum kernel.
#include <cstdint>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/record.h"
#include "core/cpu/reduction_loops.h"
#include "core/dispatch.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/reduce.h"
#include "core/ops/reduce_common.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask)> sum{"sum"};
}  // namespace kernels

namespace {

using cpu::Accumulator;
using cpu::kSumColumnTile;
using cpu::parallel_over_columns;
using cpu::parallel_over_rows;

// out[o, i] = sum over r of x[o, r, i].
void sum_cpu(const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  visit_any_numeric(x.dtype(), "sum", [&]<class T>() {
    const T* in = layout.source.data_ptr<T>();
    T* result = out.data_ptr<T>();
    const int64_t reduce = layout.reduce, inner = layout.inner;
    if (inner == 1) {
      parallel_over_rows<T>(layout, [&](int64_t o, const T* row) {
        Accumulator<T> total = 0;
#pragma omp simd reduction(+ : total)
        for (int64_t r = 0; r < reduce; ++r) total += row[r];
        result[o] = static_cast<T>(total);
      });
      return;
    }
    // A tile of accumulators, not the float32 output, holds the running column totals. Each
    // column is still summed row by row in order, whatever the tile's width.
    parallel_over_columns<kSumColumnTile>(layout, [&](int64_t o, int64_t i0, int64_t i1) {
      const int64_t width = i1 - i0;
      Accumulator<T> total[kSumColumnTile] = {};
      // Each row's address is formed inside the loop: an empty reduction (reduce 0) has no
      // input memory, and an offset from its null data pointer would be undefined.
      for (int64_t r = 0; r < reduce; ++r) {
        const T* row = in + (o * reduce + r) * inner + i0;
#pragma omp simd
        for (int64_t k = 0; k < width; ++k) total[k] += row[k];
      }
      for (int64_t k = 0; k < width; ++k) result[o * inner + i0 + k] = static_cast<T>(total[k]);
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::sum, DeviceType::CPU, sum_cpu);

}  // namespace

using reduction::check_defined_floating;
using reduction::expand_reduced;
using reduction::reduced_count;

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  if (auto cast = autocast::float32_operands(x)) return sum((*cast)[0], dims, keepdim);
  EMBER_CHECK(x.defined(), "sum: tensor is undefined");
  EMBER_CHECK(x.dtype() != kBool, "sum: not defined for bool tensors (convert with to(kInt64))");
  const std::vector<bool> mask = reduction_mask(dims, x.dim(), "sum");
  Tensor out = make_tensor(reduced_shape(x.sizes(), mask, keepdim), x.dtype(), x.device());
  kernels::sum[x.device()](out, x, mask);
  return autograd::record("sum", out, {x}, [shape = x.sizes(), mask](const Tensor& grad) {
    return autograd::grads(expand_reduced(grad, shape, mask));
  });
}

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  if (auto cast = autocast::float32_operands(x)) return mean((*cast)[0], dims, keepdim);
  check_defined_floating(x, "mean");
  const std::vector<bool> mask = reduction_mask(dims, x.dim(), "mean");
  const auto count = static_cast<double>(reduced_count(x, mask));
  // A 16-bit mean is taken in float32 and rounded once: its sum rounded to 16 bits would be
  // divided by a count rounded to 16 bits, and a float16 sum overflows past 65504 (the mean of
  // 100,000 ones would be inf / inf). The float32 copy is transient; gradients flow through to().
  if (is_16_bit_floating_point(x.dtype())) return div(sum(x.to(kFloat32), dims, keepdim), count).to(x.dtype());
  return div(sum(x, dims, keepdim), count);
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

// any and all count the nonzero elements with the sum kernel.
Tensor any(const Tensor& x, const Shape& dims, bool keepdim) {
  EMBER_CHECK(x.defined(), "any: tensor is undefined");
  const Tensor nonzero_count = sum(ne(x, scalar_tensor(0, x.options())).to(kInt64), dims, keepdim);
  return autograd::non_differentiable("any", gt(nonzero_count, 0.0));
}

Tensor all(const Tensor& x, const Shape& dims, bool keepdim) {
  EMBER_CHECK(x.defined(), "all: tensor is undefined");
  const Tensor zero_count = sum(eq(x, scalar_tensor(0, x.options())).to(kInt64), dims, keepdim);
  return autograd::non_differentiable("all", eq(zero_count, 0.0));
}

Tensor any(const Tensor& x) { return any(x, {}, false); }
Tensor all(const Tensor& x) { return all(x, {}, false); }

// Tensor member shorthands for the ops above.
Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return ember::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }

}  // namespace ember
