// Shape arithmetic shared by every op.
#include "core/shape.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ember {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t size : shape) n *= size;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

void check_shape(const Shape& shape, std::string_view op) {
  int64_t extent = 1;
  for (int64_t size : shape) {
    EMBER_CHECK(size >= 0, "{}: negative size {} in shape {}", op, size, shape_str(shape));
    EMBER_CHECK(!__builtin_mul_overflow(extent, std::max<int64_t>(size, 1), &extent),
                "{}: shape {} is too large: its element count or strides overflow int64", op, shape_str(shape));
  }
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op) {
  const int64_t effective_rank = std::max<int64_t>(rank, 1);
  EMBER_CHECK(dim >= -effective_rank && dim < effective_rank,
              "{}: dim {} is out of range for a tensor of rank {} (expected a dim in [{}, {}])", op, dim,
              rank, -effective_rank, effective_rank - 1);
  return dim < 0 ? dim + effective_rank : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right; missing leading dims count as 1.
    const int64_t sa = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t sb = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    EMBER_CHECK(sa == sb || sa == 1 || sb == 1,
                "{}: shapes {} and {} cannot be broadcast together (dim {}: {} vs {})", op, shape_str(a),
                shape_str(b), i, sa, sb);
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

bool is_broadcastable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

std::vector<bool> reduction_mask(const Shape& dims, int64_t rank, std::string_view op) {
  std::vector<bool> mask(rank, dims.empty());
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, rank, op);
    if (rank == 0) continue;
    EMBER_CHECK(!mask[d], "{}: dim {} appears more than once in {}", op, d, shape_str(dims));
    mask[d] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& sizes, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!mask[d]) out.push_back(sizes[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

}  // namespace ember
