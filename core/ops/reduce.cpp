// Reductions: sum, mean, var/std, logsumexp, amax/amin, max/min with indices, argmax/argmin,
// all/any. Every CPU kernel walks the [outer, reduce, inner] layout of cpu/reduction_layout.h.
#include "core/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include "core/autocast.h"
#include "core/autograd/record.h"
#include "core/cpu/reduction_layout.h"
#include "core/cpu/vector_math.h"
#include "core/cpu/wrapping.h"
#include "core/dispatch.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/unary.h"
#include "core/ops/views.h"
#include "core/parallel.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask)> sum{"sum"};
constinit KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask, int64_t correction)>
    variance{"var"};
constinit KernelTable<void(const Tensor& out, const Tensor& x, const std::vector<bool>& mask)> logsumexp{
    "logsumexp"};
constinit KernelTable<void(Extremum which, const Tensor& out, const Tensor& x, const std::vector<bool>& mask)>
    extremum{"amax"};
constinit KernelTable<void(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& x,
                           const std::vector<bool>& mask)>
    extremum_index{"argmax"};
}  // namespace kernels

namespace {

// ---- CPU kernels ----------------------------------------------------------------------------
//
// Each kernel has two shapes of loop. With inner == 1 every output reduces one contiguous row
// (a vectorised reduction, rows split over threads). Otherwise an output column (o, i) steps
// through the rows r with stride `inner`, so the kernel works on a block of neighbouring
// columns at once and the loop over the block is the unit-stride, vectorised one.

// Float32 sums accumulate in double, so long rows and columns keep their precision: a float32
// running total of n terms drifts by up to about n * 2^-24 of it. The 16-bit formats compute in
// float and accumulate in double as float32 does, so their one rounding is that of the result.
// int64 totals accumulate in uint64, so a sum past int64's range wraps around as PyTorch's does
// (cpu/wrapping.h) where an int64 total would be undefined behaviour.
template <class T>
using Accumulator = std::conditional_t<std::is_same_v<compute_type<T>, float>, double, cpu::wrapping_t<T>>;

// Kernels that need scratch per column work on tiles of this many columns.
constexpr int64_t kColumnTile = 64;

// Calls body(o, i0, i1) for blocks of columns [i0, i1) of outer index o, covering every output
// once, split over threads by output element.
template <class Body>
void parallel_over_columns(const cpu::ReductionLayout& layout, Body&& body) {
  const int64_t inner = layout.inner;
  parallel_for(layout.outer * inner, layout.reduce, [&](int64_t begin, int64_t end) {
    for (int64_t flat = begin; flat < end;) {
      const int64_t o = flat / inner, i0 = flat % inner;
      const int64_t i1 = std::min(inner, i0 + (end - flat));
      for (int64_t t0 = i0; t0 < i1; t0 += kColumnTile) body(o, t0, std::min(i1, t0 + kColumnTile));
      flat += i1 - i0;
    }
  });
}

// Calls body(o, row) for each contiguous row of an inner == 1 layout, split over threads.
template <class T, class Body>
void parallel_over_rows(const cpu::ReductionLayout& layout, Body&& body) {
  const T* in = layout.source.data_ptr<T>();
  const int64_t reduce = layout.reduce;
  parallel_for(layout.outer, reduce, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) body(o, in + o * reduce);
  });
}

// Comparisons below take compute_type values: a 16-bit element is compared as the float it
// converts to exactly.
template <class C>
bool is_nan(C value) {
  if constexpr (std::is_floating_point_v<C>) return value != value;
  else return false;
}

template <Extremum which, class C>
bool beats(C candidate, C best) {
  if constexpr (which == Extremum::Max) return candidate > best;
  else return candidate < best;
}

// The largest (smallest) element of a contiguous row of n >= 1 elements, NaN if it holds one,
// as a compute_type value (exactly an element of the row, or NaN).
template <Extremum which, class T>
compute_type<T> row_extremum(const T* row, int64_t n) {
  using C = compute_type<T>;
  C best = row[0];
  int nan_seen = 0;
  if constexpr (which == Extremum::Max) {
#pragma omp simd reduction(max : best) reduction(| : nan_seen)
    for (int64_t r = 0; r < n; ++r) {
      const C v = row[r];
      best = v > best ? v : best;
      nan_seen |= is_nan(v);
    }
  } else {
#pragma omp simd reduction(min : best) reduction(| : nan_seen)
    for (int64_t r = 0; r < n; ++r) {
      const C v = row[r];
      best = v < best ? v : best;
      nan_seen |= is_nan(v);
    }
  }
  if constexpr (std::is_floating_point_v<C>) {
    if (nan_seen) return std::numeric_limits<C>::quiet_NaN();
  }
  return best;
}

// Folds row r into running extrema of a column block; once a column holds NaN it keeps it.
template <Extremum which, class T>
void fold_extremum(T* best, const T* row, int64_t count) {
  using C = compute_type<T>;
#pragma omp simd
  for (int64_t k = 0; k < count; ++k) {
    const C v = row[k];
    best[k] = (beats<which, C>(v, best[k]) || is_nan(v)) ? row[k] : best[k];
  }
}

// Calls fn.template operator()<which>() with `which` as a compile-time constant.
template <class Fn>
void visit_extremum(Extremum which, Fn&& fn) {
  if (which == Extremum::Max) fn.template operator()<Extremum::Max>();
  else fn.template operator()<Extremum::Min>();
}

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
    // A tile of accumulators, not the float32 output, holds the running column totals.
    parallel_over_columns(layout, [&](int64_t o, int64_t i0, int64_t i1) {
      const int64_t width = i1 - i0;
      Accumulator<T> total[kColumnTile] = {};
      const T* base = in + o * reduce * inner + i0;
      for (int64_t r = 0; r < reduce; ++r) {
        const T* row = base + r * inner;
#pragma omp simd
        for (int64_t k = 0; k < width; ++k) total[k] += row[k];
      }
      for (int64_t k = 0; k < width; ++k) result[o * inner + i0 + k] = static_cast<T>(total[k]);
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::sum, DeviceType::CPU, sum_cpu);

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

// The shift subtracted before exponentiating: the max, except when it is infinite. A row of
// -inf then gives log(0) = -inf and a row holding +inf gives +inf, instead of inf - inf = NaN.
template <class C>
C logsumexp_shift(C max) {
  return std::isinf(max) ? C(0) : max;
}

// e^x, vectorisable for float32 (libm's scalar exp would stop the vectoriser); float64 keeps
// std::exp so gradcheck's reference values stay exact.
template <class T>
inline T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return cpu::exp_f32(x);
  else return std::exp(x);
}

void logsumexp_cpu(const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  visit_any_floating(x.dtype(), "logsumexp", [&]<class T>() {
    // Float32 terms are added in double, as the sum kernel does: each term is in [0, 1] after
    // the shift, but a float32 total of millions of them drifts by about n * 2^-24 relative
    // (5M randn: 7.6e-4 in the result, hence in every gradient element exp(x - result)), and
    // a double total stays within the float32 rounding of the result. exp_of stays float32,
    // so the loop still vectorises (its one conversion per term is cheap next to the exp).
    // 16-bit elements compute as float32 ones (C is float), rounding once on store.
    using C = compute_type<T>;
    using Acc = Accumulator<T>;
    const T* in = layout.source.data_ptr<T>();
    T* result = out.data_ptr<T>();
    const int64_t reduce = layout.reduce, inner = layout.inner;
    if (reduce == 0) {  // the sum of no exponentials is 0
      parallel_for(layout.outer * inner, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) result[i] = T(-std::numeric_limits<C>::infinity());
      });
      return;
    }
    if (inner == 1) {
      parallel_over_rows<T>(layout, [&](int64_t o, const T* row) {
        const C shift = logsumexp_shift(row_extremum<Extremum::Max>(row, reduce));
        Acc total = 0;
#pragma omp simd reduction(+ : total)
        for (int64_t r = 0; r < reduce; ++r) total += static_cast<Acc>(exp_of(C(row[r]) - shift));
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
      for (int64_t r = 0; r < reduce; ++r) {
        const T* row = base + r * inner;
#pragma omp simd
        for (int64_t k = 0; k < width; ++k) total[k] += static_cast<Acc>(exp_of(C(row[k]) - shift[k]));
      }
      for (int64_t k = 0; k < width; ++k) {
        result[o * inner + i0 + k] = static_cast<T>(static_cast<Acc>(shift[k]) + std::log(total[k]));
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::logsumexp, DeviceType::CPU, logsumexp_cpu);

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

// ---- shared pieces of the ops ---------------------------------------------------------------

// The dims a mask covers, as a dims list for the reductions above.
Shape masked_dims(const std::vector<bool>& mask) {
  Shape dims;
  for (size_t d = 0; d < mask.size(); ++d) {
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  }
  return dims;
}

// How many elements of x each output combines.
int64_t reduced_count(const Tensor& x, const std::vector<bool>& mask) {
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d) count *= mask[d] ? x.sizes()[d] : 1;
  return count;
}

// A reduced tensor (keepdim or not) reshaped to keepdim form, so it broadcasts against x.
Tensor keepdim_form(const Tensor& reduced, const Shape& input_shape, const std::vector<bool>& mask) {
  return reshape(reduced, reduced_shape(input_shape, mask, /*keepdim=*/true));
}

// The gradient of a reduction, broadcast back over the reduced dims.
Tensor expand_reduced(const Tensor& grad, const Shape& input_shape, const std::vector<bool>& mask) {
  return expand(keepdim_form(grad, input_shape, mask), input_shape);
}

// The most negative finite value of a floating dtype.
double lowest_finite(DType dtype) {
  switch (dtype) {
    case DType::Float64: return std::numeric_limits<double>::lowest();
    case DType::BFloat16: return -0x1.fep127;  // float32's exponent range, 8 significant bits
    case DType::Float16: return -65504.0;
    default: return std::numeric_limits<float>::lowest();
  }
}

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

void check_defined_numeric(const Tensor& x, const char* op) {
  EMBER_CHECK(x.defined(), "{}: tensor is undefined", op);
  EMBER_CHECK(x.dtype() != kBool, "{}: not defined for bool tensors (convert with to(kInt64))", op);
}

void check_defined_floating(const Tensor& x, const char* op) {
  EMBER_CHECK(x.defined(), "{}: tensor is undefined", op);
  EMBER_CHECK(is_floating_point(x.dtype()), "{}: expected a floating point tensor, got {}", op, x.dtype());
}

// Every reduction's backward below is written with differentiable ops (expand, mul, eq, exp...),
// not a kernel: under create_graph it records by itself, so no reduction needs a second-order
// path of its own. The chosen-element masks of max/min/amax are constants, as their second
// derivative is zero almost everywhere.
//
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

// ---- sum and mean -------------------------------------------------------------------------

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

// ---- var and std ----------------------------------------------------------------------------

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

// ---- logsumexp ------------------------------------------------------------------------------

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

// ---- amax, amin, max, min -------------------------------------------------------------------

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

// ---- argmax, argmin -------------------------------------------------------------------------

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

// ---- any, all -------------------------------------------------------------------------------

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
