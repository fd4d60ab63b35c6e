// The device side of selecting by a mask (cuda/ops/select.cu): where (which masked_fill runs too)
// and the triangles of tril and triu. fmt-free.
#pragma once

#include <cstdint>

#include "cuda/common/half_elements.h"
#include "cuda/common/strided_layout.h"

namespace ember::cuda {

// out[i] = condition[i] ? a[i] : b[i] over layout (operands out, condition, a, b), all three
// broadcast. T: float, double, int64_t, bool, __nv_bfloat16, __half.
template <class T>
void launch_where(const StridedLayout<4>& layout, int64_t n, T* out, const bool* condition, const T* a,
                  const T* b);
// out = x with the elements outside the triangle zeroed; x and out contiguous, `count`
// elements of [..., rows, cols] matrices. Lower keeps column - row <= diagonal, upper keeps
// column - row >= diagonal. T: as for launch_where.
template <class T>
void launch_triangle(T* out, const T* x, int64_t count, int64_t rows, int64_t cols, int64_t diagonal, bool lower);

}  // namespace ember::cuda
