// cat, stack, split and chunk. cat writes each input into its window of the output with the
// copy kernel; split and chunk are narrow() views, so their gradients come from narrow.
#include "core/ops/join.h"

#include "core/autograd/record.h"
#include "core/ops/copy.h"
#include "core/ops/views.h"

namespace ember {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].defined(), "cat: tensor {} is undefined", i);
  }
  const Tensor& first = tensors.front();
  EMBER_CHECK(first.dim() > 0, "cat: cannot concatenate 0-d tensors (unsqueeze them or use stack)");
  dim = wrap_dim(dim, first.dim(), "cat");
  Shape out_shape = first.sizes();
  out_shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.dtype() == first.dtype(), "cat: dtype mismatch: tensor 0 is {}, tensor {} is {}", first.dtype(),
                i, t.dtype());
    EMBER_CHECK(t.device() == first.device(), "cat: device mismatch: tensor 0 is on {}, tensor {} is on {}",
                first.device(), i, t.device());
    EMBER_CHECK(t.dim() == first.dim(), "cat: tensor 0 has shape {} but tensor {} has shape {} (ranks differ)",
                shape_str(first.sizes()), i, shape_str(t.sizes()));
    for (int64_t d = 0; d < t.dim(); ++d) {
      EMBER_CHECK(d == dim || t.sizes()[d] == first.sizes()[d],
                  "cat: tensor 0 has shape {} but tensor {} has shape {}: sizes must match except in dim {} "
                  "(dim {}: {} != {})",
                  shape_str(first.sizes()), i, shape_str(t.sizes()), dim, d, first.sizes()[d], t.sizes()[d]);
    }
    EMBER_CHECK(!__builtin_add_overflow(out_shape[dim], t.sizes()[dim], &out_shape[dim]),
                "cat: the sizes of dim {} overflow int64 when tensor {} (shape {}) is added", dim, i, shape_str(t.sizes()));
  }

  Tensor out = make_tensor(out_shape, first.dtype(), first.device());
  Shape window_shape = out_shape;
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    const int64_t length = t.sizes()[dim];
    if (length > 0 && t.numel() > 0) {
      window_shape[dim] = length;
      const Tensor window = make_view(out, window_shape, out.strides(), start * out.strides()[dim]);
      kernels::copy[first.device()](window, t);
    }
    start += length;
  }

  std::vector<int64_t> lengths;
  lengths.reserve(tensors.size());
  for (const Tensor& t : tensors) lengths.push_back(t.sizes()[dim]);
  return autograd::record("cat", out, tensors, [lengths, dim](const Tensor& grad) {
    std::vector<Tensor> gradients;
    gradients.reserve(lengths.size());
    int64_t start = 0;
    for (const int64_t length : lengths) {
      gradients.push_back(narrow(grad, dim, start, length));
      start += length;
    }
    return gradients;
  });
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].defined(), "stack: tensor {} is undefined", i);
    EMBER_CHECK(tensors[i].sizes() == tensors[0].sizes(),
                "stack: expects tensors of equal shape, but tensor 0 has shape {} and tensor {} has shape {}",
                shape_str(tensors[0].sizes()), i, shape_str(tensors[i].sizes()));
  }
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (const Tensor& t : tensors) expanded.push_back(unsqueeze(t, dim));
  return cat(expanded, dim);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  EMBER_CHECK(x.defined(), "split: tensor is undefined");
  EMBER_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  EMBER_CHECK(split_size > 0, "split: split_size must be positive, got {}", split_size);
  const int64_t size = x.sizes()[dim];
  if (size == 0) return {narrow(x, dim, 0, 0)};
  std::vector<Tensor> pieces;
  pieces.reserve((size + split_size - 1) / split_size);
  for (int64_t start = 0; start < size; start += split_size) {
    pieces.push_back(narrow(x, dim, start, std::min(split_size, size - start)));
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  EMBER_CHECK(x.defined(), "split: tensor is undefined");
  EMBER_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.sizes()[dim];
  int64_t total = 0;
  for (const int64_t piece : split_sizes) {
    EMBER_CHECK(piece >= 0, "split: sizes must be non-negative, got {}", shape_str(split_sizes));
    total += piece;
  }
  EMBER_CHECK(total == size, "split: sizes {} add up to {}, but dim {} of shape {} has size {}",
              shape_str(split_sizes), total, dim, shape_str(x.sizes()), size);
  std::vector<Tensor> pieces;
  pieces.reserve(split_sizes.size());
  int64_t start = 0;
  for (const int64_t piece : split_sizes) {
    pieces.push_back(narrow(x, dim, start, piece));
    start += piece;
  }
  return pieces;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  EMBER_CHECK(x.defined(), "chunk: tensor is undefined");
  EMBER_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-d tensor");
  EMBER_CHECK(chunks > 0, "chunk: number of chunks must be positive, got {}", chunks);
  dim = wrap_dim(dim, x.dim(), "chunk");
  const int64_t size = x.sizes()[dim];
  // As torch.chunk: an empty dim still gives `chunks` (empty) pieces.
  if (size == 0) return split(x, std::vector<int64_t>(chunks, 0), dim);
  return split(x, (size + chunks - 1) / chunks, dim);
}

}  // namespace ember
