// The device side of copies (cuda/ops/copy.cu): converting and rearranging elements on the GPU.
// Transfers between host and device are cudaMemcpy calls in cuda/copy.cpp. fmt-free.
#pragma once

#include <cstdint>

#include "cuda/common/half_elements.h"
#include "cuda/common/strided_layout.h"

namespace ember::cuda {

// out[i] = in[i] converted to Out over layout (operand 0 out, operand 1 in); Out and In are
// float, double, int64_t, bool, __nv_bfloat16 or __half (cuda/common/half_elements.h: to a 16-bit
// type through float, rounded to nearest even).
template <class Out, class In>
void launch_convert(const StridedLayout<2>& layout, int64_t n, Out* out, const In* in);

}  // namespace ember::cuda
