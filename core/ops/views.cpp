// View ops: new shape, strides or offset over the same storage. Each backward maps the
// gradient of the view back to the shape of its input.
#include "core/ops/views.h"

#include <algorithm>
#include <numeric>

#include "core/autograd/record.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"
#include "core/ops/inplace.h"

namespace ember {
namespace {

// Replaces a single -1 in `shape` by the size that keeps the element count.
Shape infer_size(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      EMBER_CHECK(infer_at < 0, "{}: only one dimension can be -1, got shape {}", op, shape_str(shape));
      infer_at = static_cast<int64_t>(i);
    } else {
      EMBER_CHECK(out[i] >= 0, "{}: invalid size {} in shape {}", op, out[i], shape_str(shape));
    }
  }
  Shape known_sizes = out;
  if (infer_at >= 0) known_sizes.erase(known_sizes.begin() + infer_at);
  check_shape(known_sizes, op);
  const int64_t known = numel_of(known_sizes);
  if (infer_at >= 0) {
    EMBER_CHECK(known != 0 && numel % known == 0, "{}: shape {} is invalid for input of shape {} ({} elements)",
                op, shape_str(shape), shape_str(from), numel);
    out[infer_at] = numel / known;
    check_shape(out, op);  // [2^62, -1, 4] of 0 elements: the inferred 0 leaves strides of 2^64
  } else {
    EMBER_CHECK(known == numel, "{}: shape {} is invalid for input of shape {} ({} elements)", op,
                shape_str(shape), shape_str(from), numel);
  }
  return out;
}

// Strides that let `x` be seen as `shape` without copying, if any: each run of dims of x
// that is contiguous within itself can be split or merged freely.
std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
  const Shape& old_sizes = x.sizes();
  const Shape& old_strides = x.strides();
  Shape new_strides(shape.size(), 0);
  if (x.numel() == 0 || x.dim() == 0) return contiguous_strides(shape);
  // Group old dims (skipping size-1 dims) into contiguous chunks, and fill new dims chunk by chunk.
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    // A chunk ends where the next outer dim is not laid out right after this one.
    const bool chunk_ends =
        tensor_d == 0 || (old_sizes[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (chunk_ends) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Tensor record_reshape_like(const char* op, const Tensor& out, const Tensor& x) {
  const Shape in_shape = x.sizes();
  return autograd::record(op, out, {x}, [in_shape](const Tensor& grad) {
    return autograd::grads(reshape(grad, in_shape));
  });
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  const Shape sizes = infer_size(shape, x.numel(), "view", x.sizes());
  const std::optional<Shape> strides = view_strides(x, sizes);
  EMBER_CHECK(strides.has_value(),
              "view: shape {} is incompatible with the strides of the input (shape {}, strides {}); use "
              "reshape(), which copies when it must",
              shape_str(sizes), shape_str(x.sizes()), shape_str(x.strides()));
  return record_reshape_like("view", make_view(x, sizes, *strides, x.storage_offset()), x);
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  const Shape sizes = infer_size(shape, x.numel(), "reshape", x.sizes());
  if (const std::optional<Shape> strides = view_strides(x, sizes)) {
    return record_reshape_like("reshape", make_view(x, sizes, *strides, x.storage_offset()), x);
  }
  return view(contiguous(x), sizes);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  const int64_t rank = x.dim();
  if (rank == 0) return x;
  dim0 = wrap_dim(dim0, rank, "transpose");
  dim1 = wrap_dim(dim1, rank, "transpose");
  Shape sizes = x.sizes(), strides = x.strides();
  std::swap(sizes[dim0], sizes[dim1]);
  std::swap(strides[dim0], strides[dim1]);
  Tensor out = make_view(x, sizes, strides, x.storage_offset());
  return autograd::record("transpose", out, {x}, [dim0, dim1](const Tensor& grad) {
    return autograd::grads(transpose(grad, dim0, dim1));
  });
}

Tensor t(const Tensor& x) {
  EMBER_CHECK(x.dim() <= 2, "t: expects a tensor of rank <= 2, got shape {} (use transpose)", shape_str(x.sizes()));
  return x.dim() < 2 ? x : transpose(x, 0, 1);
}

Tensor permute(const Tensor& x, const Shape& dims) {
  const int64_t rank = x.dim();
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == rank, "permute: got {} dims {} for a tensor of rank {}",
              dims.size(), shape_str(dims), rank);
  Shape sizes(rank), strides(rank), inverse(rank);
  std::vector<bool> seen(rank, false);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = wrap_dim(dims[i], rank, "permute");
    EMBER_CHECK(!seen[d], "permute: dim {} repeats in {}", d, shape_str(dims));
    seen[d] = true;
    sizes[i] = x.sizes()[d];
    strides[i] = x.strides()[d];
    inverse[d] = i;
  }
  Tensor out = make_view(x, sizes, strides, x.storage_offset());
  return autograd::record("permute", out, {x}, [inverse](const Tensor& grad) {
    return autograd::grads(permute(grad, inverse));
  });
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape sizes = x.sizes(), strides = x.strides();
  const int64_t stride = dim < x.dim() ? sizes[dim] * strides[dim] : 1;
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  return record_reshape_like("unsqueeze", make_view(x, sizes, strides, x.storage_offset()), x);
}

Tensor squeeze(const Tensor& x) {
  Shape sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.sizes()[d] != 1) {
      sizes.push_back(x.sizes()[d]);
      strides.push_back(x.strides()[d]);
    }
  }
  return record_reshape_like("squeeze", make_view(x, sizes, strides, x.storage_offset()), x);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  if (x.dim() == 0) return x;
  dim = wrap_dim(dim, x.dim(), "squeeze");
  if (x.sizes()[dim] != 1) return x;
  Shape sizes = x.sizes(), strides = x.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return record_reshape_like("squeeze", make_view(x, sizes, strides, x.storage_offset()), x);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = wrap_dim(start_dim, x.dim(), "flatten");
  end_dim = wrap_dim(end_dim, x.dim(), "flatten");
  EMBER_CHECK(start_dim <= end_dim, "flatten: start_dim {} comes after end_dim {}", start_dim, end_dim);
  Shape shape(x.sizes().begin(), x.sizes().begin() + start_dim);
  int64_t merged = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) merged *= x.sizes()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), x.sizes().begin() + end_dim + 1, x.sizes().end());
  return reshape(x, shape);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  EMBER_CHECK(rank >= x.dim(), "expand: cannot expand shape {} to fewer dims {}", shape_str(x.sizes()),
              shape_str(shape));
  Shape sizes(rank), strides(rank);
  const int64_t lead = rank - x.dim();
  for (int64_t d = 0; d < rank; ++d) {
    if (d < lead) {
      EMBER_CHECK(shape[d] >= 0, "expand: size -1 is not allowed for a new leading dim in {}", shape_str(shape));
      sizes[d] = shape[d];
      strides[d] = 0;
      continue;
    }
    const int64_t old = x.sizes()[d - lead];
    const int64_t want = shape[d] == -1 ? old : shape[d];
    EMBER_CHECK(want >= 0, "expand: invalid size {} in {}", want, shape_str(shape));
    EMBER_CHECK(old == want || old == 1, "expand: shape {} cannot be expanded to {} (dim {}: {} vs {})",
                shape_str(x.sizes()), shape_str(shape), d, old, want);
    sizes[d] = want;
    strides[d] = old == want ? x.strides()[d - lead] : 0;
  }
  check_shape(sizes, "expand");
  Tensor out = make_view(x, sizes, strides, x.storage_offset());
  const Shape in_shape = x.sizes();
  return autograd::record("expand", out, {x}, [in_shape](const Tensor& grad) {
    return autograd::grads(sum_to(grad, in_shape));
  });
}

namespace {

// The gradient of slice: grad written into zeros of the input's shape. Linear in grad, so it is
// an op of its own whose backward is the slice again (a backward op with a backward; it records
// only under create_graph, where writing into a view of the zeros would be refused).
Tensor slice_backward(const Tensor& grad, const Shape& in_shape, int64_t dim, int64_t begin, int64_t stop,
                      int64_t step) {
  Tensor full_grad = zeros(in_shape, grad.options());
  {
    NoGradGuard no_grad;
    slice(full_grad, dim, begin, stop, step).copy_(grad);
  }
  return autograd::record("slice_backward", full_grad, {grad}, [dim, begin, stop, step](const Tensor& grad_grad) {
    return autograd::grads(slice(grad_grad, dim, begin, stop, step));
  });
}

}  // namespace

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  EMBER_CHECK(x.dim() > 0, "slice: cannot slice a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "slice");
  EMBER_CHECK(step > 0, "slice: step must be positive, got {}", step);
  const int64_t size = x.sizes()[dim];
  auto clamp_index = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  const int64_t begin = start ? clamp_index(*start) : 0;
  const int64_t stop = std::max(begin, end ? clamp_index(*end) : size);
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[dim] = (stop - begin) / step + ((stop - begin) % step != 0);  // a rounded-up division that cannot overflow
  // With one element or none the stride is never used, and a huge step could overflow it.
  if (sizes[dim] > 1) strides[dim] *= step;
  Tensor out = make_view(x, sizes, strides, x.storage_offset() + begin * x.strides()[dim]);
  const Shape in_shape = x.sizes();
  return autograd::record("slice", out, {x}, [in_shape, dim, begin, stop, step](const Tensor& grad) {
    return autograd::grads(slice_backward(grad, in_shape, dim, begin, stop, step));
  });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  EMBER_CHECK(x.dim() > 0, "narrow: cannot narrow a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "narrow");
  const int64_t size = x.sizes()[dim];
  if (start < 0) start += size;
  EMBER_CHECK(start >= 0 && length >= 0 && start <= size && length <= size - start,
              "narrow: start {} and length {} are out of range for dim {} of size {} (shape {})", start, length,
              dim, size, shape_str(x.sizes()));
  return slice(x, dim, start, start + length, 1);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  EMBER_CHECK(x.dim() > 0, "select: cannot select from a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "select");
  const int64_t size = x.sizes()[dim];
  EMBER_CHECK(index >= -size && index < size, "select: index {} is out of range for dim {} of size {} (shape {})",
              index, dim, size, shape_str(x.sizes()));
  if (index < 0) index += size;
  return squeeze(narrow(x, dim, index, 1), dim);
}

// Tensor member shorthands for the ops above.
Tensor Tensor::view(const Shape& shape) const { return ember::view(*this, shape); }
Tensor Tensor::reshape(const Shape& shape) const { return ember::reshape(*this, shape); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return ember::transpose(*this, dim0, dim1); }
Tensor Tensor::t() const { return ember::t(*this); }
Tensor Tensor::permute(const Shape& dims) const { return ember::permute(*this, dims); }
Tensor Tensor::unsqueeze(int64_t dim) const { return ember::unsqueeze(*this, dim); }
Tensor Tensor::squeeze() const { return ember::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return ember::squeeze(*this, dim); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return ember::flatten(*this, start_dim, end_dim);
}
Tensor Tensor::expand(const Shape& shape) const { return ember::expand(*this, shape); }
Tensor Tensor::expand_as(const Tensor& other) const { return ember::expand(*this, other.sizes()); }
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return ember::narrow(*this, dim, start, length);
}
Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                            int64_t step) const {
  return ember::slice(*this, dim, start, end, step);
}
Tensor Tensor::select(int64_t dim, int64_t index) const { return ember::select(*this, dim, index); }

}  // namespace ember
