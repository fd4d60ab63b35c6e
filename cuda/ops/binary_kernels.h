// The device side of the binary ops (cuda/ops/binary.cu), broadcasting through the layout. fmt-free.
#pragma once

#include <cstdint>

#include "core/ops/op_codes.h"
#include "cuda/common/half_elements.h"
#include "cuda/common/strided_layout.h"

namespace ember::cuda {

// out[i] = op(a[i], b[i]) for the arithmetic ops (Add to Minimum) over layout (operands out,
// a, b). T: float, double, __nv_bfloat16, __half (16-bit computed in float, rounded on store);
// int64_t for all but Div and Pow (the caller checks).
template <class T>
void launch_binary_arithmetic(BinaryOp op, const StridedLayout<3>& layout, int64_t n, T* out, const T* a,
                              const T* b);
// out[i] = op(a[i], b[i]) for the predicates (Eq to LogicalOr). T: float, double, int64_t, bool,
// __nv_bfloat16, __half.
template <class T>
void launch_binary_predicate(BinaryOp op, const StridedLayout<3>& layout, int64_t n, bool* out, const T* a,
                             const T* b);

}  // namespace ember::cuda
