// The largest and smallest elements: amax, amin, max and min (with indices along a dim),
// argmax and argmin; their backward, and the CPU kernels of values and of first positions.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/autograd/record.h"
#include "core/cpu/reduction_loops.h"
#include "core/dispatch.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/reduce.h"
#include "core/ops/reduce_common.h"
#include "core/ops/views.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(Extremum which, const Tensor& out, const Tensor& x, const std::vector<bool>& mask)>
    extremum{"amax"};
constinit KernelTable<void(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& x,
                           const std::vector<bool>& mask)>
    extremum_index{"argmax"};
}  // namespace kernels

namespace {

using cpu::Accumulator;
using cpu::kColumnTile;
using cpu::parallel_over_columns;
using cpu::parallel_over_rows;
using cpu::beats;
using cpu::fold_extremum;
using cpu::is_nan;
using cpu::row_extremum;
using reduction::check_defined_numeric;
using reduction::keepdim_form;
using reduction::masked_dims;

// Calls fn.template operator()<which>() with `which` as a compile-time constant.
template <class Fn>
void visit_extremum(Extremum which, Fn&& fn) {
  if (which == Extremum::Max) fn.template operator()<Extremum::Max>();
  else fn.template operator()<Extremum::Min>();
}

void extremum_cpu(Extremum which_value, const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  visit_any_numeric(x.dtype(), which_value == Extremum::Max ? "amax" : "amin", [&]<class T>() {
    visit_extremum(which_value, [&]<Extremum which>() {
      const T* in = layout.source.data_ptr<T>();
      T* result = out.data_ptr<T>();
      const int64_t reduce = layout.reduce, inner = layout.inner;
      if (inner == 1) {
        parallel_over_rows<T>(layout,
                              [&](int64_t o, const T* row) { result[o] = T(row_extremum<which>(row, reduce)); });
        return;
      }
      parallel_over_columns(layout, [&](int64_t o, int64_t i0, int64_t i1) {
        T* best = result + o * inner + i0;
        const T* base = in + o * reduce * inner + i0;
        std::copy(base, base + (i1 - i0), best);
        for (int64_t r = 1; r < reduce; ++r) fold_extremum<which>(best, base + r * inner, i1 - i0);
      });
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::extremum, DeviceType::CPU, extremum_cpu);

void extremum_index_cpu(Extremum which_value, const Tensor& values, const Tensor& indices, const Tensor& x,
                        const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  visit_any_numeric(x.dtype(), which_value == Extremum::Max ? "argmax" : "argmin", [&]<class T>() {
    using C = compute_type<T>;
    visit_extremum(which_value, [&]<Extremum which>() {
      const T* in = layout.source.data_ptr<T>();
      T* value_out = values.defined() ? values.data_ptr<T>() : nullptr;
      int64_t* index_out = indices.data_ptr<int64_t>();
      const int64_t reduce = layout.reduce, inner = layout.inner;
      if (inner == 1) {
        // The extremum first (vectorised), then a scan for its first occurrence.
        parallel_over_rows<T>(layout, [&](int64_t o, const T* row) {
          const C best = row_extremum<which>(row, reduce);
          int64_t index = 0;
          if (is_nan(best)) {
            while (!is_nan(C(row[index]))) ++index;
          } else {
            while (C(row[index]) != best) ++index;
          }
          index_out[o] = index;
          if (value_out) value_out[o] = row[index];
        });
        return;
      }
      parallel_over_columns(layout, [&](int64_t o, int64_t i0, int64_t i1) {
        const int64_t width = i1 - i0;
        C best[kColumnTile];
        int64_t position[kColumnTile] = {};
        const T* base = in + o * reduce * inner + i0;
        std::copy(base, base + width, best);
        for (int64_t r = 1; r < reduce; ++r) {
          const T* row = base + r * inner;
#pragma omp simd
          for (int64_t k = 0; k < width; ++k) {
            // Strictly better keeps the first of ties; a NaN replaces only a number.
            const C v = row[k];
            const bool take = beats<which>(v, best[k]) || (is_nan(v) && !is_nan(best[k]));
            best[k] = take ? v : best[k];
            position[k] = take ? r : position[k];
          }
        }
        std::copy(position, position + width, index_out + o * inner + i0);
        if (value_out) {
          for (int64_t k = 0; k < width; ++k) value_out[o * inner + i0 + k] = T(best[k]);
        }
      });
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::extremum_index, DeviceType::CPU, extremum_index_cpu);

// max, min and their relatives have no value for an empty group.
void check_nonempty_groups(const Tensor& x, const std::vector<bool>& mask, const char* op, bool all_dims) {
  if (all_dims) {
    EMBER_CHECK(x.numel() > 0, "{}: the tensor is empty (shape {}); the {} of no elements is undefined", op,
                shape_str(x.sizes()), op);
    return;
  }
  for (int64_t d = 0; d < x.dim(); ++d) {
    EMBER_CHECK(!mask[d] || x.sizes()[d] > 0,
                "{}: cannot reduce dim {} of size 0 (tensor of shape {}); the {} of no elements is undefined",
                op, d, shape_str(x.sizes()), op);
  }
}

// amax/amin and the all-element max/min; `op` names the public op in errors.
Tensor extremum_values(Extremum which, const Tensor& x, const Shape& dims, bool keepdim, const char* op) {
  check_defined_numeric(x, op);
  const std::vector<bool> mask = reduction_mask(dims, x.dim(), op);
  check_nonempty_groups(x, mask, op, dims.empty());
  Tensor out = make_tensor(reduced_shape(x.sizes(), mask, keepdim), x.dtype(), x.device());
  kernels::extremum.get(x.device(), op)(which, out, x, mask);
  // Every element equal to the extremum shares the gradient evenly, as in PyTorch's amax.
  return autograd::record(op, out, {x}, [sx = autograd::save(x), so = autograd::save(out), mask](const Tensor& grad) {
    const Tensor& input = sx.get();
    const Tensor selected = eq(input, keepdim_form(so.get(), input.sizes(), mask)).to(input.dtype());
    const Tensor share = div(keepdim_form(grad, input.sizes(), mask), sum(selected, masked_dims(mask), true));
    return autograd::grads(mul(selected, share));
  });
}

// The mask of one dim (all dims when dim is absent) for the index reductions.
std::vector<bool> index_mask(const Tensor& x, std::optional<int64_t> dim, const char* op) {
  return reduction_mask(dim ? Shape{*dim} : Shape{}, x.dim(), op);
}

// Values (when wanted) and int64 indices of the extremum along `dim`, or over the flattened
// tensor when dim is absent (then the result is 0-d).
ValuesIndices extremum_with_index(Extremum which, const Tensor& x, std::optional<int64_t> dim, bool keepdim,
                                  bool want_values, const char* op) {
  check_defined_numeric(x, op);
  const std::vector<bool> mask = index_mask(x, dim, op);
  check_nonempty_groups(x, mask, op, !dim);
  const Shape out_shape = dim ? reduced_shape(x.sizes(), mask, keepdim) : Shape{};
  ValuesIndices result;
  if (want_values) result.values = make_tensor(out_shape, x.dtype(), x.device());
  result.indices = make_tensor(out_shape, kInt64, x.device());
  kernels::extremum_index.get(x.device(), op)(which, result.values, result.indices, x, mask);
  return result;
}

}  // namespace

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
  return extremum_values(Extremum::Max, x, dims, keepdim, "amax");
}
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
  return extremum_values(Extremum::Min, x, dims, keepdim, "amin");
}
Tensor max(const Tensor& x) { return extremum_values(Extremum::Max, x, {}, false, "max"); }
Tensor min(const Tensor& x) { return extremum_values(Extremum::Min, x, {}, false, "min"); }

namespace {

ValuesIndices max_or_min(Extremum which, const Tensor& x, int64_t dim, bool keepdim, const char* op) {
  ValuesIndices result = extremum_with_index(which, x, dim, keepdim, /*want_values=*/true, op);
  result.indices = autograd::non_differentiable(op, result.indices);
  // The gradient goes to the chosen element only: a one-hot of the index along dim.
  result.values = autograd::record(
      op, result.values, {x},
      [shape = x.sizes(), dim = wrap_dim(dim, x.dim(), op), keepdim, si = autograd::save(result.indices)](
          const Tensor& grad) {
        if (shape.empty()) return autograd::grads(grad);
        const Tensor index = keepdim ? si.get() : unsqueeze(si.get(), dim);
        Shape position_shape(shape.size(), 1);
        position_shape[dim] = shape[dim];
        const Tensor positions =
            reshape(arange(static_cast<double>(shape[dim]), TensorOptions(kInt64).device(grad.device())),
                    position_shape);
        const Tensor chosen = eq(positions, index).to(grad.dtype());
        return autograd::grads(mul(chosen, keepdim ? grad : unsqueeze(grad, dim)));
      });
  return result;
}

}  // namespace

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  return max_or_min(Extremum::Max, x, dim, keepdim, "max");
}
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
  return max_or_min(Extremum::Min, x, dim, keepdim, "min");
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return autograd::non_differentiable(
      "argmax", extremum_with_index(Extremum::Max, x, dim, keepdim, /*want_values=*/false, "argmax").indices);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return autograd::non_differentiable(
      "argmin", extremum_with_index(Extremum::Min, x, dim, keepdim, /*want_values=*/false, "argmin").indices);
}
Tensor argmax(const Tensor& x) {
  return autograd::non_differentiable(
      "argmax", extremum_with_index(Extremum::Max, x, std::nullopt, false, /*want_values=*/false, "argmax").indices);
}
Tensor argmin(const Tensor& x) {
  return autograd::non_differentiable(
      "argmin", extremum_with_index(Extremum::Min, x, std::nullopt, false, /*want_values=*/false, "argmin").indices);
}

}  // namespace ember
