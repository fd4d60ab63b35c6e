// index_add on the GPU as a function, for the kernels built on it (index_add itself, and
// embedding's backward in cuda/ops/embedding.cpp). Host only.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ember::cuda {

// target[o, index[j], :] += source[o, j, :] with target (contiguous) seen as [outer, size, inner]
// around dim, skipping j whose index equals `skip` (-1: none). Every numeric dtype; a 16-bit
// target adds up in a float32 copy that is rounded back once, after every addition.
void index_add_rows(const char* op, const Tensor& target, const Tensor& source, int64_t dim, const Tensor& index,
                    int64_t skip);

}  // namespace ember::cuda
