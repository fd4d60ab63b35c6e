// sort, argsort and topk along any dim: the dim is moved last, each row is sorted through an
// array of positions, and the values' gradient is scattered back to those positions.
#include "core/ops/sort.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/autograd/record.h"
#include "core/float_to_int.h"
#include "core/ops/copy.h"
#include "core/ops/factory.h"
#include "core/ops/indexing.h"
#include "core/ops/views.h"
#include "core/parallel.h"

namespace ember {
namespace kernels {
constinit KernelTable<void(const Tensor& values, const Tensor& indices, const Tensor& x, bool descending)> sort{
    "sort"};
}  // namespace kernels

namespace {

// Whether a comes strictly before b. NaN sorts as the largest value, so the order stays a strict
// weak ordering (NaNs are equivalent to each other) and std::sort never sees an inconsistent one.
// 16-bit values compare as the floats they convert to exactly (C is compute_type).
template <class C>
bool sorts_before(C a, C b, bool descending) {
  if constexpr (std::is_floating_point_v<C>) {
    const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
    if (a_nan || b_nan) return descending ? (a_nan && !b_nan) : (b_nan && !a_nan);
  }
  return descending ? a > b : a < b;
}

void sort_cpu(const Tensor& values, const Tensor& indices, const Tensor& x, bool descending) {
  if (values.numel() == 0) return;
  const int64_t length = x.sizes().back(), k = values.sizes().back();
  const int64_t rows = x.numel() / length;
  visit_any_dtype(x.dtype(), [&]<class T>() {
    using C = compute_type<T>;
    const T* source = x.data_ptr<T>();
    T* sorted_values = values.data_ptr<T>();
    int64_t* sorted_indices = indices.data_ptr<int64_t>();
    const int64_t cost = length * (1 + float_to_int<int64_t>(std::log2(static_cast<double>(length) + 1)));
    parallel_for(rows, cost, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> order(length);
      for (int64_t row = begin; row < end; ++row) {
        const T* v = source + row * length;
        std::iota(order.begin(), order.end(), int64_t{0});
        if (k == length) {
          std::stable_sort(order.begin(), order.end(),
                           [v, descending](int64_t i, int64_t j) { return sorts_before<C>(v[i], v[j], descending); });
        } else {
          // Breaking ties by position gives exactly the first k of the stable sort.
          std::partial_sort(order.begin(), order.begin() + k, order.end(), [v, descending](int64_t i, int64_t j) {
            if (sorts_before<C>(v[i], v[j], descending)) return true;
            if (sorts_before<C>(v[j], v[i], descending)) return false;
            return i < j;
          });
        }
        T* out_values = sorted_values + row * k;
        int64_t* out_indices = sorted_indices + row * k;
        for (int64_t c = 0; c < k; ++c) {
          out_indices[c] = order[c];
          out_values[c] = v[order[c]];
        }
      }
    });
  });
}
EMBER_REGISTER_KERNEL(kernels::sort, DeviceType::CPU, sort_cpu);

// The first k of x sorted along dim, with their indices. The values' gradient goes back to the
// elements they came from.
ValuesIndices sorted_along(const char* op, const Tensor& x, int64_t dim, int64_t k, bool descending) {
  const int64_t last = x.dim() - 1;
  Tensor values, indices;
  {
    NoGradGuard no_grad;
    const Tensor rows = contiguous(dim == last ? x : transpose(x, dim, last));
    Shape shape = rows.sizes();
    shape.back() = k;
    values = make_tensor(shape, x.dtype(), x.device());
    indices = make_tensor(shape, kInt64, x.device());
    kernels::sort.get(x.device(), op)(values, indices, rows, descending);
    if (dim != last) {
      values = contiguous(transpose(values, dim, last));
      indices = contiguous(transpose(indices, dim, last));
    }
  }
  values = autograd::record(op, values, {x},
                            [saved_indices = autograd::save(indices), shape = x.sizes(), dim](const Tensor& grad) {
                              // The values are x gathered at the indices: gather's backward.
                              return autograd::grads(gather_backward(grad, shape, dim, saved_indices.get()));
                            });
  return {values, autograd::non_differentiable(op, indices)};
}

// A 0-d tensor sorts as a one-element vector; the results get its 0-d shape back.
ValuesIndices sorted_scalar(const char* op, const Tensor& x, int64_t k, bool descending) {
  ValuesIndices result = sorted_along(op, reshape(x, {1}), 0, k, descending);
  if (k == 1) result = {reshape(result.values, {}), reshape(result.indices, {})};
  return result;
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending) {
  EMBER_CHECK(x.defined(), "sort: tensor is undefined");
  dim = wrap_dim(dim, x.dim(), "sort");
  if (x.dim() == 0) return sorted_scalar("sort", x, 1, descending);
  return sorted_along("sort", x, dim, x.sizes()[dim], descending);
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  EMBER_CHECK(x.defined(), "argsort: tensor is undefined");
  dim = wrap_dim(dim, x.dim(), "argsort");
  NoGradGuard no_grad;  // only the indices are wanted
  return sort(x, dim, descending).indices;
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  EMBER_CHECK(x.defined(), "topk: tensor is undefined");
  dim = wrap_dim(dim, x.dim(), "topk");
  const int64_t size = x.dim() == 0 ? 1 : x.sizes()[dim];
  EMBER_CHECK(k >= 0, "topk: k must be non-negative, got {}", k);
  EMBER_CHECK(k <= size, "topk: k {} is larger than the size {} of dim {} (shape {})", k, size, dim,
              shape_str(x.sizes()));
  if (x.dim() == 0) return sorted_scalar("topk", x, k, largest);
  return sorted_along("topk", x, dim, k, largest);
}

}  // namespace ember
