// softmax and log_softmax: fused CPU kernels for the forward (max, exp-sum, normalise) and for
// the backward, over the [outer, n, inner] layout of a contiguous input (inner == 1 when the
// dim is last, the fast path).
#include "core/ops/softmax.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/record.h"
#include "core/cpu/half_rows.h"
#include "core/cpu/kernel_table.h"
#include "core/dispatch.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/unary.h"
#include "core/parallel.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log)>
    softmax{"softmax"};
constinit KernelTable<void(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t outer, int64_t n,
                           int64_t inner, bool log)>
    softmax_backward{"softmax_backward"};
}  // namespace kernels

namespace {

// Columns handled together in the strided case: enough for full vectors, small enough that
// the block's rows stay in cache between passes.
constexpr int64_t kColumnBlock = 256;

// Runs row_fn(offset, has_next) for each contiguous row (inner == 1; has_next when the same
// thread goes on to the following row) or column_fn(offset, width) for each block of
// columns, in parallel.
template <class RowFn, class ColumnFn>
void for_each_slice(int64_t outer, int64_t n, int64_t inner, RowFn row_fn, ColumnFn column_fn) {
  if (inner == 1) {
    parallel_for(outer, n, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) row_fn(o * n, o + 1 < end);
    });
    return;
  }
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  parallel_for(outer * blocks, n * std::min(inner, kColumnBlock), [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t o = unit / blocks, i0 = (unit % blocks) * kColumnBlock;
      column_fn(o * n * inner + i0, std::min(kColumnBlock, inner - i0));
    }
  });
}

void softmax_cpu(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  visit_any_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>() {
    const T* in = x.data_ptr<T>();
    T* result = out.data_ptr<T>();
    const cpu::RowKernels<compute_type<T>>& rows = cpu::row_kernels<compute_type<T>>(cpu::kernels());
    if constexpr (std::is_same_v<T, compute_type<T>>) {
      for_each_slice(
          outer, n, inner,
          [&](int64_t offset, bool has_next) {
            rows.softmax_row(result + offset, in + offset, has_next ? in + offset + n : nullptr,
                             has_next ? result + offset + n : nullptr, n, log);
          },
          [&](int64_t offset, int64_t width) {
            T max[kColumnBlock], sum[kColumnBlock];
            rows.softmax_columns(result + offset, in + offset, n, inner, width, log, max, sum);
          });
    } else {
      // A 16-bit row (or block of columns) is widened into float32 scratch, where the float32
      // code computes its softmax in place, and rounded once into out.
      for_each_slice(
          outer, n, inner,
          [&](int64_t offset, bool) {
            // One row of scratch per thread, kept between rows so that a row costs no allocation.
            thread_local std::vector<float> row;
            row.resize(n);
            cpu::widen_row(in + offset, n, row.data());
            rows.softmax_row(row.data(), row.data(), nullptr, nullptr, n, log);
            cpu::round_row(row.data(), n, result + offset);
          },
          [&](int64_t offset, int64_t width) {
            // Not kept between calls like the row: it is n * kColumnBlock floats.
            std::vector<float> block(n * width);
            for (int64_t r = 0; r < n; ++r) cpu::widen_row(in + offset + r * inner, width, block.data() + r * width);
            float max[kColumnBlock], sum[kColumnBlock];
            rows.softmax_columns(block.data(), block.data(), n, width, width, log, max, sum);
            for (int64_t r = 0; r < n; ++r) cpu::round_row(block.data() + r * width, width, result + offset + r * inner);
          });
    }
  });
}
EMBER_REGISTER_KERNEL(kernels::softmax, DeviceType::CPU, softmax_cpu);

// softmax:     grad_x = y * (grad_y - sum(grad_y * y))
// log_softmax: grad_x = grad_y - exp(y) * sum(grad_y)
// A 16-bit grad_y and y are read as float32 and each gradient is rounded once, on store.
void softmax_backward_cpu(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t outer, int64_t n,
                          int64_t inner, bool log) {
  visit_any_floating(y.dtype(), log ? "log_softmax" : "softmax", [&]<class T>() {
    using C = compute_type<T>;
    const T* g = grad_y.data_ptr<T>();
    const T* out = y.data_ptr<T>();
    T* gx = grad_x.data_ptr<T>();
    const cpu::RowKernels<C>& rows = cpu::row_kernels<C>(cpu::kernels());
    // log_softmax's grad_y - exp(y) * dots over `width` elements (dots one per element, or
    // `dot` for all where dots is nullptr): the rung's exp, on float32 copies of 16-bit rows.
    auto log_softmax_gradient = [&](const T* gr, const T* yr, int64_t width, C dot, const C* dots, T* gxr) {
      if constexpr (std::is_same_v<T, C>) {
        rows.log_softmax_gradient(gr, yr, width, dot, dots, gxr);
      } else {
        thread_local std::vector<float> scratch;
        scratch.resize(2 * width);
        cpu::widen_row(gr, width, scratch.data());
        cpu::widen_row(yr, width, scratch.data() + width);
        rows.log_softmax_gradient(scratch.data(), scratch.data() + width, width, dot, dots, scratch.data());
        cpu::round_row(scratch.data(), width, gxr);
      }
    };
    auto row_fn = [&](int64_t offset, bool) {
      const T* gr = g + offset;
      const T* yr = out + offset;
      T* gxr = gx + offset;
      C dot = 0;
      if (log) {
#pragma omp simd reduction(+ : dot)
        for (int64_t i = 0; i < n; ++i) dot += C(gr[i]);
        log_softmax_gradient(gr, yr, n, dot, nullptr, gxr);
      } else {
#pragma omp simd reduction(+ : dot)
        for (int64_t i = 0; i < n; ++i) dot += C(gr[i]) * C(yr[i]);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) gxr[i] = T(C(yr[i]) * (C(gr[i]) - dot));
      }
    };
    auto column_fn = [&](int64_t offset, int64_t width) {
      C dot[kColumnBlock];
      for (int64_t i = 0; i < width; ++i) dot[i] = 0;
      for (int64_t r = 0; r < n; ++r) {
        const T* gr = g + offset + r * inner;
        const T* yr = out + offset + r * inner;
        if (log) {
#pragma omp simd
          for (int64_t i = 0; i < width; ++i) dot[i] += C(gr[i]);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < width; ++i) dot[i] += C(gr[i]) * C(yr[i]);
        }
      }
      for (int64_t r = 0; r < n; ++r) {
        const T* gr = g + offset + r * inner;
        const T* yr = out + offset + r * inner;
        T* gxr = gx + offset + r * inner;
        if (log) {
          log_softmax_gradient(gr, yr, width, C(0), dot, gxr);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < width; ++i) gxr[i] = T(C(yr[i]) * (C(gr[i]) - dot[i]));
        }
      }
    };
    for_each_slice(outer, n, inner, row_fn, column_fn);
  });
}
EMBER_REGISTER_KERNEL(kernels::softmax_backward, DeviceType::CPU, softmax_backward_cpu);

struct SoftmaxLayout {
  int64_t outer = 1, n = 1, inner = 1;
};

SoftmaxLayout layout_along(const Shape& sizes, int64_t dim) {
  SoftmaxLayout layout;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d < dim) layout.outer *= sizes[d];
    else if (d == dim) layout.n = sizes[d];
    else layout.inner *= sizes[d];
  }
  return layout;
}

Tensor softmax_op(const Tensor& x, int64_t dim, bool log) {
  if (auto cast = autocast::float32_operands(x)) return softmax_op((*cast)[0], dim, log);
  const char* name = log ? "log_softmax" : "softmax";
  EMBER_CHECK(x.defined(), "{}: tensor is undefined", name);
  EMBER_CHECK(is_floating_point(x.dtype()), "{}: expected a floating point tensor, got {} of shape {}", name,
              x.dtype(), shape_str(x.sizes()));
  const int64_t wrapped = wrap_dim(dim, x.dim(), name);
  const SoftmaxLayout layout = layout_along(x.sizes(), x.dim() == 0 ? 0 : wrapped);
  const Tensor input = contiguous(x);
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  if (out.numel() > 0) kernels::softmax.get(x.device(), name)(out, input, layout.outer, layout.n, layout.inner, log);
  const Shape along = x.dim() == 0 ? Shape{} : Shape{wrapped};
  return autograd::record(name, out, {x}, [y = autograd::save(out), layout, log, name, along](const Tensor& grad) {
    const Tensor& saved = y.get();
    if (GradMode::is_enabled()) {
      // create_graph: the same formulas written with differentiable ops (composite, taken only
      // here), so that the gradient stays a function of y (which carries x's history) and of grad.
      // softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g).
      if (log) return autograd::grads(sub(grad, mul(exp(saved), sum(grad, along, /*keepdim=*/true))));
      return autograd::grads(mul(saved, sub(grad, sum(mul(grad, saved), along, /*keepdim=*/true))));
    }
    const Tensor grad_y = contiguous(grad);
    Tensor grad_x = make_tensor(saved.sizes(), saved.dtype(), saved.device());
    if (grad_x.numel() > 0) {
      kernels::softmax_backward.get(saved.device(), name)(grad_x, grad_y, saved, layout.outer, layout.n,
                                                          layout.inner, log);
    }
    return autograd::grads(grad_x);
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, true); }

}  // namespace ember
