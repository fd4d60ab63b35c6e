// index_select, gather, masked_fill, where, tril and triu: argument checks, the CPU kernels
// (gathers, scatter-adds for the backwards, a three-operand select, triangular masks) and the
// backward of each.
#include "core/ops/indexing.h"

#include <algorithm>

#include "core/autograd/record.h"
#include "core/cpu/loops.h"
#include "core/cpu/wrapping.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/index_check.h"
#include "core/ops/views.h"
#include "core/parallel.h"
#include "core/scalar_conversion.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index)> index_select{
    "index_select"};
constinit KernelTable<void(const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index)> index_add{
    "index_add"};
constinit KernelTable<void(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index)> gather{"gather"};
constinit KernelTable<void(const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index)>
    scatter_add{"scatter_add"};
constinit KernelTable<void(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b)> where{
    "where"};
constinit KernelTable<void(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower)> triangle{"triangle"};
}  // namespace kernels

namespace {

// --- CPU kernels --------------------------------------------------------------------------

// Products of the sizes before and after `dim`.
int64_t outer_size(const Shape& sizes, int64_t dim) {
  int64_t n = 1;
  for (int64_t d = 0; d < dim; ++d) n *= sizes[d];
  return n;
}
int64_t inner_size(const Shape& sizes, int64_t dim) {
  int64_t n = 1;
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); ++d) n *= sizes[d];
  return n;
}

// The element offsets (with `strides`) of every position of dims [first, last) of `sizes`, in
// row-major order. gather and scatter_add walk their index row by row and find the matching
// element of the other tensor, whose sizes may be larger, through these tables.
std::vector<int64_t> position_offsets(const Shape& sizes, const Shape& strides, int64_t first, int64_t last) {
  std::vector<int64_t> offsets{0};
  for (int64_t d = first; d < last; ++d) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * static_cast<size_t>(sizes[d]));
    for (const int64_t base : offsets) {
      for (int64_t c = 0; c < sizes[d]; ++c) next.push_back(base + c * strides[d]);
    }
    offsets = std::move(next);
  }
  return offsets;
}

// x is contiguous; rows of `inner` elements are copied whole.
void index_select_cpu(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t size = x.sizes()[dim], count = index.numel();
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t outer = outer_size(x.sizes(), dim), inner = inner_size(x.sizes(), dim);
  visit_any_dtype(x.dtype(), [&]<class T>() {
    const T* source = x.data_ptr<T>();
    T* result = out.data_ptr<T>();
    parallel_for(outer * count, inner, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t o = row / count, j = row % count;
        const T* from = source + (o * size + idx[j]) * inner;
        T* to = result + row * inner;
#pragma omp simd
        for (int64_t i = 0; i < inner; ++i) to[i] = from[i];
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::index_select, DeviceType::CPU, index_select_cpu);

// Calls add_into.template operator()<T, Total>(total) with T target's element type and total
// the tensor that index_add and scatter_add add into: target itself (Total = T), or for a 16-bit
// target a float32 copy of it (Total = float), rounded back into target once at the end. Adding
// into the 16-bit target directly would round after every term that a repeated index brings. An
// int64 total wraps around past int64's range, as PyTorch's does (cpu/wrapping.h).
template <class AddInto>
void accumulate_into(const Tensor& target, const char* op, AddInto add_into) {
  visit_any_numeric(target.dtype(), op, [&]<class T>() {
    if constexpr (std::is_same_v<compute_type<T>, T>) {
      add_into.template operator()<T, T>(target);
    } else {
      const Tensor total = make_tensor(target.sizes(), kFloat32, target.device());
      kernels::copy[target.device()](total, target);
      add_into.template operator()<T, float>(total);
      kernels::copy[target.device()](target, total);
    }
  });
}

// Calls body(o, i0, i1) for runs of columns [i0, i1) of outer index o, covering the (outer,
// inner) columns once, split over threads. Threads split the columns, never the index, so two
// equal indices never add into the same element at once.
template <class Body>
void parallel_over_column_runs(int64_t outer, int64_t inner, int64_t cost_per_column, Body body) {
  parallel_for(outer * inner, cost_per_column, [&](int64_t begin, int64_t end) {
    for (int64_t flat = begin; flat < end;) {
      const int64_t o = flat / inner, i0 = flat % inner;
      const int64_t i1 = std::min(inner, i0 + (end - flat));
      body(o, i0, i1);
      flat += i1 - i0;
    }
  });
}

// target is contiguous.
void index_add_cpu(const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index) {
  const int64_t size = target.sizes()[dim], count = index.numel();
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t outer = outer_size(target.sizes(), dim), inner = inner_size(target.sizes(), dim);
  accumulate_into(target, "index_add", [&]<class T, class Total>(const Tensor& total) {
    const T* from = source.data_ptr<T>();
    Total* to = total.data_ptr<Total>();
    parallel_over_column_runs(outer, inner, count, [&](int64_t o, int64_t i0, int64_t i1) {
      for (int64_t j = 0; j < count; ++j) {
        Total* to_row = to + (o * size + idx[j]) * inner;
        const T* from_row = from + (o * count + j) * inner;
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) to_row[i] = cpu::wrapping_add(to_row[i], static_cast<Total>(from_row[i]));
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::index_add, DeviceType::CPU, index_add_cpu);

void gather_cpu(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t* idx = index.data_ptr<int64_t>();
  const Shape& shape = index.sizes();
  const int64_t rank = index.dim();
  const int64_t outer = outer_size(shape, dim), count = shape[dim], inner = inner_size(shape, dim);
  const std::vector<int64_t> outer_offsets = position_offsets(shape, x.strides(), 0, dim);
  const std::vector<int64_t> inner_offsets = position_offsets(shape, x.strides(), dim + 1, rank);
  const int64_t step = x.strides()[dim];
  visit_any_dtype(x.dtype(), [&]<class T>() {
    const T* source = x.data_ptr<T>();
    T* result = out.data_ptr<T>();
    parallel_for(outer * count, inner, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const T* base = source + outer_offsets[row / count];
        const int64_t* idx_row = idx + row * inner;
        T* to = result + row * inner;
        for (int64_t i = 0; i < inner; ++i) to[i] = base[idx_row[i] * step + inner_offsets[i]];
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::gather, DeviceType::CPU, gather_cpu);

// Index positions that differ outside `dim` land on different target elements (the index is
// no larger than the target there), so threads split those positions and each walks `dim`
// serially: repeated indices along dim accumulate without races.
void scatter_add_cpu(const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index) {
  const int64_t* idx = index.data_ptr<int64_t>();
  const Shape& shape = index.sizes();
  const int64_t rank = index.dim();
  const int64_t outer = outer_size(shape, dim), count = shape[dim], inner = inner_size(shape, dim);
  accumulate_into(target, "scatter_add", [&]<class T, class Total>(const Tensor& total) {
    const std::vector<int64_t> outer_offsets = position_offsets(shape, total.strides(), 0, dim);
    const std::vector<int64_t> inner_offsets = position_offsets(shape, total.strides(), dim + 1, rank);
    const int64_t step = total.strides()[dim];
    const T* from = source.data_ptr<T>();
    Total* to = total.data_ptr<Total>();
    parallel_over_column_runs(outer, inner, count, [&](int64_t o, int64_t i0, int64_t i1) {
      Total* base = to + outer_offsets[o];
      for (int64_t j = 0; j < count; ++j) {
        const int64_t row = (o * count + j) * inner;
        for (int64_t i = i0; i < i1; ++i) {
          Total& to_element = base[idx[row + i] * step + inner_offsets[i]];
          to_element = cpu::wrapping_add(to_element, static_cast<Total>(from[row + i]));
        }
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::scatter_add, DeviceType::CPU, scatter_add_cpu);

void where_cpu(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  visit_any_dtype(out.dtype(), [&]<class T>() {
    cpu::for_each_element<T, bool, T, T>(out, {condition, a, b}, [](bool c, T x, T y) { return c ? x : y; });
  });
}
EMBER_REGISTER_KERNEL(kernels::where, DeviceType::CPU, where_cpu);

// Each row of a matrix is a kept run and a zeroed run, so both loops are plain fills/copies.
void triangle_cpu(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower) {
  const int64_t rows = x.sizes()[x.dim() - 2], cols = x.sizes()[x.dim() - 1];
  if (x.numel() == 0) return;
  const int64_t total_rows = x.numel() / cols;
  visit_any_dtype(x.dtype(), [&]<class T>() {
    const T* source = x.data_ptr<T>();
    T* result = out.data_ptr<T>();
    parallel_for(total_rows, cols, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t r = row % rows;
        // Kept columns: [0, split) for the lower triangle, [split, cols) for the upper one.
        const int64_t split = std::clamp<int64_t>(lower ? r + diagonal + 1 : r + diagonal, 0, cols);
        const T* from = source + row * cols;
        T* to = result + row * cols;
        const int64_t keep_begin = lower ? 0 : split, keep_end = lower ? split : cols;
        for (int64_t j = 0; j < keep_begin; ++j) to[j] = T(0);
#pragma omp simd
        for (int64_t j = keep_begin; j < keep_end; ++j) to[j] = from[j];
        for (int64_t j = keep_end; j < cols; ++j) to[j] = T(0);
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::triangle, DeviceType::CPU, triangle_cpu);

// --- helpers for the ops ---------------------------------------------------------------------

// x's values laid out contiguously, without a graph node: the op records its own.
Tensor contiguous_values(const Tensor& x) {
  NoGradGuard no_grad;
  return contiguous(x);
}

void check_index(const char* op, const Tensor& x, const Tensor& index) {
  EMBER_CHECK(x.defined() && index.defined(), "{}: tensor is undefined", op);
  EMBER_CHECK(index.dtype() == kInt64, "{}: index must be int64, got {} (convert with to(kInt64))", op,
              index.dtype());
  EMBER_CHECK(x.device() == index.device(), "{}: device mismatch: input is on {}, index is on {}", op, x.device(),
              index.device());
}

// "gather: index 7 (at flat position 2) is out of range for dim 1 of size 5"
IndexRangeMessage index_range_message(const char* op, const Tensor& x, int64_t dim) {
  return {fmt::format("{}: index", op), fmt::format("dim {} of size {}", dim, x.sizes()[dim])};
}

void check_mask(const char* op, const char* what, const Tensor& mask, const Tensor& x) {
  EMBER_CHECK(mask.defined() && x.defined(), "{}: tensor is undefined", op);
  EMBER_CHECK(mask.dtype() == kBool, "{}: {} must be bool, got {} (make one with a comparison such as eq)", op, what,
              mask.dtype());
  EMBER_CHECK(mask.device() == x.device(), "{}: device mismatch: {} is on {}, input is on {}", op, what,
              mask.device(), x.device());
}

Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  EMBER_CHECK(x.defined(), "{}: tensor is undefined", op);
  EMBER_CHECK(x.dim() >= 2, "{}: expects a tensor of at least 2 dims, got shape {}", op, shape_str(x.sizes()));
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  kernels::triangle.get(x.device(), op)(out, contiguous_values(x), diagonal, lower);
  return autograd::record(op, out, {x}, [diagonal, lower](const Tensor& grad) {
    return autograd::grads(lower ? tril(grad, diagonal) : triu(grad, diagonal));
  });
}

// The gradient of index_select: grad's slices added into zeros at `index` along dim. Linear in
// grad, so it is an op of its own whose backward is index_select again (a backward op with a
// backward; it records only under create_graph).
Tensor index_select_backward(const Tensor& grad, const Shape& x_shape, int64_t dim, const Tensor& index) {
  Tensor target = zeros(x_shape, grad.options());
  kernels::index_add[grad.device()](target, contiguous_values(grad), dim, index);
  return autograd::record("index_select_backward", target, {grad},
                          [saved_index = autograd::save(index), dim](const Tensor& grad_grad) {
                            return autograd::grads(index_select(grad_grad, dim, saved_index.get()));
                          });
}

}  // namespace

Tensor gather_backward(const Tensor& grad, const Shape& x_shape, int64_t dim, const Tensor& index) {
  Tensor target = zeros(x_shape, grad.options());
  kernels::scatter_add[grad.device()](target, contiguous_values(grad), dim, index);
  return autograd::record("gather_backward", target, {grad},
                          [saved_index = autograd::save(index), dim](const Tensor& grad_grad) {
                            return autograd::grads(gather(grad_grad, dim, saved_index.get()));
                          });
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index("index_select", x, index);
  EMBER_CHECK(x.dim() > 0, "index_select: cannot index a 0-d tensor");
  EMBER_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape {}", shape_str(index.sizes()));
  dim = wrap_dim(dim, x.dim(), "index_select");
  const Tensor flat_index = contiguous_values(index);
  check_index_range(flat_index, x.sizes()[dim], std::nullopt, index_range_message("index_select", x, dim));
  Shape shape = x.sizes();
  shape[dim] = index.numel();
  Tensor out = make_tensor(shape, x.dtype(), x.device());
  kernels::index_select[x.device()](out, contiguous_values(x), dim, flat_index);
  return autograd::record("index_select", out, {x},
                          [saved_index = autograd::save(flat_index), shape = x.sizes(), dim](const Tensor& grad) {
                            return autograd::grads(index_select_backward(grad, shape, dim, saved_index.get()));
                          });
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index("gather", x, index);
  EMBER_CHECK(index.dim() == x.dim(), "gather: index must have the rank of the input, got shapes {} (input) and {} "
              "(index)", shape_str(x.sizes()), shape_str(index.sizes()));
  dim = wrap_dim(dim, x.dim(), "gather");
  if (x.dim() == 0) return reshape(gather(reshape(x, {1}), 0, reshape(index, {1})), {});
  for (int64_t d = 0; d < x.dim(); ++d) {
    EMBER_CHECK(d == dim || index.sizes()[d] <= x.sizes()[d],
                "gather: index of shape {} is larger than the input of shape {} in dim {} ({} > {})",
                shape_str(index.sizes()), shape_str(x.sizes()), d, index.sizes()[d], x.sizes()[d]);
  }
  const Tensor flat_index = contiguous_values(index);
  check_index_range(flat_index, x.sizes()[dim], std::nullopt, index_range_message("gather", x, dim));
  Tensor out = make_tensor(index.sizes(), x.dtype(), x.device());
  kernels::gather[x.device()](out, x, dim, flat_index);
  return autograd::record("gather", out, {x},
                          [saved_index = autograd::save(flat_index), shape = x.sizes(), dim](const Tensor& grad) {
                            return autograd::grads(gather_backward(grad, shape, dim, saved_index.get()));
                          });
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.defined() && b.defined(), "where: tensor is undefined");
  check_mask("where", "condition", condition, a);
  EMBER_CHECK(a.dtype() == b.dtype(), "where: dtype mismatch: {} and {} (convert one with to() first)", a.dtype(),
              b.dtype());
  EMBER_CHECK(a.device() == b.device(), "where: device mismatch: {} and {}", a.device(), b.device());
  const Shape shape =
      broadcast_shapes(broadcast_shapes(condition.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = make_tensor(shape, a.dtype(), a.device());
  kernels::where[a.device()](out, condition, a, b);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record("where", out, {a, b},
                          [saved_condition = autograd::save(condition), shape_a = a.sizes(), shape_b = b.sizes(),
                           need_a, need_b](const Tensor& grad) {
                            const Tensor& condition = saved_condition.get();
                            const Tensor zero = scalar_tensor(0.0, grad.options());
                            Tensor grad_a = need_a ? sum_to(where(condition, grad, zero), shape_a) : Tensor();
                            Tensor grad_b = need_b ? sum_to(where(condition, zero, grad), shape_b) : Tensor();
                            return autograd::grads(grad_a, grad_b);
                          });
}

Tensor where(const Tensor& condition, const Tensor& a, double b) {
  EMBER_CHECK(a.defined(), "where: tensor is undefined");
  return where(condition, a, scalar_operand(a, b, "where"));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_mask("masked_fill", "mask", mask, x);
  EMBER_CHECK(is_broadcastable_to(mask.sizes(), x.sizes()),
              "masked_fill: mask of shape {} cannot be broadcast to the input's shape {}", shape_str(mask.sizes()),
              shape_str(x.sizes()));
  check_storable(value, x.dtype(), "masked_fill");
  const Tensor fill = scalar_operand(x, value, "masked_fill");
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  kernels::where.get(x.device(), "masked_fill")(out, mask, fill, x);
  return autograd::record("masked_fill", out, {x}, [saved_mask = autograd::save(mask)](const Tensor& grad) {
    return autograd::grads(where(saved_mask.get(), scalar_tensor(0.0, grad.options()), grad));
  });
}

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", x, diagonal, /*lower=*/true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", x, diagonal, /*lower=*/false); }

}  // namespace ember
