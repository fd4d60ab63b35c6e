// Shapes and strides: the arithmetic every op shares (element counts, contiguous strides,
// broadcasting, wrapping negative dims) and the "[2, 3]" text error messages use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

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
