// Reductions: sum, mean, var/std, logsumexp, amax/amin, max/min with indices, argmax/argmin,
// all/any. Every CPU kernel walks the [outer, reduce, inner] layout of cpu/reduction_layout.h.
#include "core/ops/reduce.h"

#include "core/autograd/record.h"
#include "core/cpu/reduction_layout.h"
#include "core/dispatch.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/views.h"
#include "core/parallel.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask)> sum{"sum"};
}  // namespace kernels

namespace {

// out[o, i] = sum over r of x[o, r, i]. Accumulates in double for float32 when rows are
// long, so large sums keep their precision.
void sum_cpu(const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  visit_numeric(x.dtype(), "sum", [&]<class T>() {
    const T* in = layout.source.data_ptr<T>();
    T* result = out.data_ptr<T>();
    const int64_t reduce = layout.reduce, inner = layout.inner;
    if (inner == 1) {
      parallel_for(layout.outer, reduce, [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          const T* row = in + o * reduce;
          using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
          Acc total = 0;
#pragma omp simd reduction(+ : total)
          for (int64_t r = 0; r < reduce; ++r) total += row[r];
          result[o] = static_cast<T>(total);
        }
      });
      return;
    }
    // Reduce across rows: accumulate whole rows of `inner` elements (vectorised), split over
    // threads by output element.
    parallel_for(layout.outer * inner, reduce, [&](int64_t begin, int64_t end) {
      for (int64_t flat = begin; flat < end;) {
        const int64_t o = flat / inner, i0 = flat % inner;
        const int64_t i1 = std::min(inner, i0 + (end - flat));
        T* acc = result + o * inner;
        for (int64_t i = i0; i < i1; ++i) acc[i] = 0;
        for (int64_t r = 0; r < reduce; ++r) {
          const T* row = in + (o * reduce + r) * inner;
#pragma omp simd
          for (int64_t i = i0; i < i1; ++i) acc[i] += row[i];
        }
        flat += i1 - i0;
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::sum, DeviceType::CPU, sum_cpu);

// The gradient of a reduction, broadcast back over the reduced dims.
Tensor expand_reduced(const Tensor& grad, const Shape& input_shape, const std::vector<bool>& mask) {
  return expand(reshape(grad, reduced_shape(input_shape, mask, /*keepdim=*/true)), input_shape);
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
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
  EMBER_CHECK(x.defined(), "mean: tensor is undefined");
  EMBER_CHECK(is_floating_point(x.dtype()), "mean: expected a floating point tensor, got {}", x.dtype());
  const std::vector<bool> mask = reduction_mask(dims, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d) count *= mask[d] ? x.sizes()[d] : 1;
  return div(sum(x, dims, keepdim), static_cast<double>(count));
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

}  // namespace ember

namespace ember {

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
