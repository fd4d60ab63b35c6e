// Shapes and strides: the arithmetic every op shares (element counts, contiguous strides,
// broadcasting, wrapping negative dims) and the "[2, 3]" text error messages use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

using Shape = std::vector<int64_t>;

// The element count of a shape that check_shape accepted (every tensor's shape is one).
int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

// Throws, naming `op` and the shape, when a size is negative or when the product of the sizes,
// each counted as at least 1, overflows int64: that product bounds the element count and every
// contiguous stride, so an empty dim does not hide an overflowing one ([0, 2^62, 4] has a
// first stride of 2^64). Every shape a tensor is made with passes through it.
void check_shape(const Shape& shape, std::string_view op);

// "[2, 3]"
std::string shape_str(const Shape& shape);

// Wraps a possibly negative dim into [0, rank); throws naming `op` when out of range.
// A 0-d tensor accepts dims -1 and 0, as in PyTorch.
int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op);

// The shape two shapes broadcast to under NumPy rules; throws naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

// Whether `from` can be broadcast (expanded) to `to`.
bool is_broadcastable_to(const Shape& from, const Shape& to);

// Which dims a reduction over `dims` covers (empty dims = all). Wraps negative dims; throws
// naming `op` on an out-of-range or repeated dim.
std::vector<bool> reduction_mask(const Shape& dims, int64_t rank, std::string_view op);
// The shape after reducing the masked dims: kept as 1 with keepdim, removed otherwise.
Shape reduced_shape(const Shape& sizes, const std::vector<bool>& mask, bool keepdim);

}  // namespace ember
