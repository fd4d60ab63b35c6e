// Variance and standard deviation: var and std, their backward, and the two-pass CPU kernel.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/autograd/record.h"
#include "core/cpu/reduction_loops.h"
#include "core/dispatch.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/reduce_common.h"
#include "core/ops/unary.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask, int64_t correction)>
    variance{"var"};
}  // namespace kernels

namespace {

using cpu::Accumulator;
using cpu::kColumnTile;
using cpu::parallel_over_columns;
using cpu::parallel_over_rows;
using reduction::check_defined_floating;
using reduction::keepdim_form;
using reduction::masked_dims;
using reduction::reduced_count;

// Two passes (mean, then squared deviations from it): the one-pass sum of squares minus the
// squared sum cancels catastrophically when the mean is large against the spread.
void variance_cpu(const Tensor& out, const Tensor& x, const std::vector<bool>& mask, int64_t correction) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  visit_any_floating(x.dtype(), "var", [&]<class T>() {
    using Acc = Accumulator<T>;
    const T* in = layout.source.data_ptr<T>();
    T* result = out.data_ptr<T>();
    const int64_t reduce = layout.reduce, inner = layout.inner;
    // As PyTorch: N - correction <= 0 divides by 0 and gives NaN (or inf).
    const Acc divisor = static_cast<Acc>(std::max<int64_t>(reduce - correction, 0));
    const Acc count = static_cast<Acc>(reduce);
    if (inner == 1) {
      parallel_over_rows<T>(layout, [&](int64_t o, const T* row) {
        Acc total = 0;
#pragma omp simd reduction(+ : total)
        for (int64_t r = 0; r < reduce; ++r) total += row[r];
        const Acc mean = total / count;
        Acc squares = 0;
#pragma omp simd reduction(+ : squares)
        for (int64_t r = 0; r < reduce; ++r) {
          const Acc deviation = static_cast<Acc>(row[r]) - mean;
          squares += deviation * deviation;
        }
        result[o] = static_cast<T>(squares / divisor);
      });
      return;
    }
    parallel_over_columns(layout, [&](int64_t o, int64_t i0, int64_t i1) {
      const int64_t width = i1 - i0;
      Acc mean[kColumnTile] = {}, squares[kColumnTile] = {};
      const T* base = in + o * reduce * inner + i0;
      for (int64_t r = 0; r < reduce; ++r) {
        const T* row = base + r * inner;
#pragma omp simd
        for (int64_t k = 0; k < width; ++k) mean[k] += row[k];
      }
      for (int64_t k = 0; k < width; ++k) mean[k] /= count;
      for (int64_t r = 0; r < reduce; ++r) {
        const T* row = base + r * inner;
#pragma omp simd
        for (int64_t k = 0; k < width; ++k) {
          const Acc deviation = static_cast<Acc>(row[k]) - mean[k];
          squares[k] += deviation * deviation;
        }
      }
      for (int64_t k = 0; k < width; ++k) result[o * inner + i0 + k] = static_cast<T>(squares[k] / divisor);
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::variance, DeviceType::CPU, variance_cpu);

// d var / dx = 2 (x - mean) / (N - correction), times the incoming gradient.
Tensor variance_backward(const Tensor& grad, const Tensor& x, const std::vector<bool>& mask, int64_t correction) {
  const double divisor = static_cast<double>(std::max<int64_t>(reduced_count(x, mask) - correction, 0));
  const Tensor centered = sub(x, mean(x, masked_dims(mask), /*keepdim=*/true));
  return mul(centered, mul(keepdim_form(grad, x.sizes(), mask), 2.0 / divisor));
}

// The variance without recording: var and std record their own backward.
Tensor variance_forward(const Tensor& x, const std::vector<bool>& mask, int64_t correction, bool keepdim,
                        const char* op) {
  Tensor out = make_tensor(reduced_shape(x.sizes(), mask, keepdim), x.dtype(), x.device());
  kernels::variance.get(x.device(), op)(out, x, mask, correction);
  return out;
}

// The standard deviation without recording, rounded once: a 16-bit variance would be rounded
// before its square root, so a 16-bit input's is taken in float32 (a transient copy).
Tensor std_forward(const Tensor& x, const std::vector<bool>& mask, int64_t correction, bool keepdim) {
  if (is_16_bit_floating_point(x.dtype())) {
    NoGradGuard no_grad;
    return std_forward(x.to(kFloat32), mask, correction, keepdim).to(x.dtype());
  }
  return unary_forward(UnaryOp::Sqrt, variance_forward(x, mask, correction, keepdim, "std"));
}

}  // namespace

Tensor var(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  check_defined_floating(x, "var");
  const std::vector<bool> mask = reduction_mask(dims, x.dim(), "var");
  const int64_t correction = unbiased ? 1 : 0;
  Tensor out = variance_forward(x, mask, correction, keepdim, "var");
  return autograd::record("var", out, {x}, [sx = autograd::save(x), mask, correction](const Tensor& grad) {
    return autograd::grads(variance_backward(grad, sx.get(), mask, correction));
  });
}

Tensor std(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  check_defined_floating(x, "std");
  const std::vector<bool> mask = reduction_mask(dims, x.dim(), "std");
  const int64_t correction = unbiased ? 1 : 0;
  Tensor out = std_forward(x, mask, correction, keepdim);
  return autograd::record(
      "std", out, {x}, [sx = autograd::save(x), so = autograd::save(out), mask, correction](const Tensor& grad) {
        // d std = d var / (2 std). Where std is 0 every deviation is 0 too, so the gradient is
        // 0 there (as in PyTorch) rather than 0/0: divide by 1 instead.
        const Tensor& deviation = so.get();
        const Tensor safe = add(deviation, eq(deviation, 0.0).to(deviation.dtype()));
        return autograd::grads(variance_backward(div(grad, mul(safe, 2.0)), sx.get(), mask, correction));
      });
}

Tensor var(const Tensor& x, bool unbiased) { return var(x, Shape{}, unbiased, false); }
Tensor std(const Tensor& x, bool unbiased) { return std(x, Shape{}, unbiased, false); }
Tensor var(const Tensor& x, std::initializer_list<int64_t> dims, bool unbiased, bool keepdim) {
  return var(x, Shape(dims), unbiased, keepdim);
}
Tensor std(const Tensor& x, std::initializer_list<int64_t> dims, bool unbiased, bool keepdim) {
  return std(x, Shape(dims), unbiased, keepdim);
}

}  // namespace ember
