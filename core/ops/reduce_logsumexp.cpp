// logsumexp: the op, its backward (a softmax) and the CPU kernel, which subtracts each group's
// max before exponentiating.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/record.h"
#include "core/cpu/reduction_loops.h"
#include "core/cpu/half_rows.h"
#include "core/cpu/kernel_table.h"
#include "core/dispatch.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/reduce_common.h"
#include "core/ops/unary.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask)> logsumexp{
    "logsumexp"};
}  // namespace kernels

namespace {

using cpu::Accumulator;
using cpu::kColumnTile;
using cpu::parallel_over_columns;
using cpu::parallel_over_rows;
using cpu::fold_extremum;
using cpu::row_extremum;
using reduction::check_defined_floating;
using reduction::keepdim_form;

// The shift subtracted before exponentiating: the max, except when it is infinite. A row of
// -inf then gives log(0) = -inf and a row holding +inf gives +inf, instead of inf - inf = NaN.
template <class C>
C logsumexp_shift(C max) {
  return std::isinf(max) ? C(0) : max;
}

void logsumexp_cpu(const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  visit_any_floating(x.dtype(), "logsumexp", [&]<class T>() {
    // Float32 terms are added in double, as the sum kernel does: each term is in [0, 1] after
    // the shift, but a float32 total of millions of them drifts by about n * 2^-24 relative
    // (5M randn: 7.6e-4 in the result, hence in every gradient element exp(x - result)), and
    // a double total stays within the float32 rounding of the result. The exponentials stay
    // float32 (the rung's, core/cpu/kernels/log_sum_exp_rows.h), so the loop still vectorises.
    // 16-bit elements are widened to float32 and compute as float32 ones, rounding once on store.
    using C = compute_type<T>;
    using Acc = Accumulator<T>;
    const T* in = layout.source.data_ptr<T>();
    T* result = out.data_ptr<T>();
    const int64_t reduce = layout.reduce, inner = layout.inner;
    const cpu::RowKernels<C>& rows = cpu::row_kernels<C>(cpu::kernels());
    if (reduce == 0) {  // the sum of no exponentials is 0
      parallel_for(layout.outer * inner, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) result[i] = T(-std::numeric_limits<C>::infinity());
      });
      return;
    }
    if (inner == 1) {
      parallel_over_rows<T>(layout, [&](int64_t o, const T* row) {
        const C shift = logsumexp_shift(row_extremum<Extremum::Max>(row, reduce));
        thread_local std::vector<C> scratch;
        if constexpr (!std::is_same_v<T, C>) scratch.resize(reduce);
        const Acc total = rows.sum_exp_shifted(cpu::row_in_compute_type(row, reduce, scratch), reduce, shift);
        result[o] = static_cast<T>(static_cast<Acc>(shift) + std::log(total));
      });
      return;
    }
    parallel_over_columns(layout, [&](int64_t o, int64_t i0, int64_t i1) {
      const int64_t width = i1 - i0;
      T column_max[kColumnTile];
      C shift[kColumnTile];
      Acc total[kColumnTile] = {};
      const T* base = in + o * reduce * inner + i0;
      std::copy(base, base + width, column_max);
      for (int64_t r = 1; r < reduce; ++r) fold_extremum<Extremum::Max>(column_max, base + r * inner, width);
      for (int64_t k = 0; k < width; ++k) shift[k] = logsumexp_shift(C(column_max[k]));
      C widened[kColumnTile];
      for (int64_t r = 0; r < reduce; ++r) {
        const T* row = base + r * inner;
        if constexpr (std::is_same_v<T, C>) {
          rows.accumulate_exp_shifted(row, shift, width, total);
        } else {
          cpu::widen_row(row, width, widened);
          rows.accumulate_exp_shifted(widened, shift, width, total);
        }
      }
      for (int64_t k = 0; k < width; ++k) {
        result[o * inner + i0 + k] = static_cast<T>(static_cast<Acc>(shift[k]) + std::log(total[k]));
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::logsumexp, DeviceType::CPU, logsumexp_cpu);

// The most negative finite value of a floating dtype.
double lowest_finite(DType dtype) {
  switch (dtype) {
    case DType::Float64: return std::numeric_limits<double>::lowest();
    case DType::BFloat16: return -0x1.fep127;  // float32's exponent range, 8 significant bits
    case DType::Float16: return -65504.0;
    default: return std::numeric_limits<float>::lowest();
  }
}

}  // namespace

Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  if (auto cast = autocast::float32_operands(x)) return logsumexp((*cast)[0], dims, keepdim);
  check_defined_floating(x, "logsumexp");
  const std::vector<bool> mask = reduction_mask(dims, x.dim(), "logsumexp");
  Tensor out = make_tensor(reduced_shape(x.sizes(), mask, keepdim), x.dtype(), x.device());
  kernels::logsumexp[x.device()](out, x, mask);
  return autograd::record(
      "logsumexp", out, {x}, [sx = autograd::save(x), so = autograd::save(out), mask](const Tensor& grad) {
        const Tensor& input = sx.get();
        // d/dx = exp(x - out), a softmax. Raising a -inf result to the lowest finite value
        // makes an all -inf group give exp(-inf) = 0 instead of exp(-inf + inf) = NaN.
        const double lowest = lowest_finite(input.dtype());
        const Tensor result = clamp(keepdim_form(so.get(), input.sizes(), mask), lowest, std::nullopt);
        return autograd::grads(mul(keepdim_form(grad, input.sizes(), mask), exp(sub(input, result))));
      });
}

}  // namespace ember
