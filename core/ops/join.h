// Joining and splitting tensors along a dim.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember {

// Concatenates along an existing dim; all other dims must match.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Stacks equal-shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of consecutive pieces of `split_size` along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Views of pieces of the given sizes, which must add up to the dim's size.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
// `chunks` pieces of equal size (the last may be smaller), as torch.chunk.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

}  // namespace ember
