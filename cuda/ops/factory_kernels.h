// The device side of the factories (cuda/ops/factory.cu): fill, arange and the Philox draws.
// fmt-free.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "cuda/common/half_elements.h"
#include "cuda/common/strided_layout.h"

namespace ember::cuda {

// Every launcher takes T = float, double, __nv_bfloat16 or __half; fill, arange and randint also
// int64_t, fill also bool. 16-bit values are rounded once, as core/ops/factory.cpp rounds them.
//
// out[i] = value, converted once (static_cast, or to nearest even for the 16-bit formats), over a
// strided layout (fill_ writes into views).
template <class T>
void launch_fill(const StridedLayout<1>& layout, int64_t n, T* out, double value);
// out[i] = start + i * step in double, then converted as fill's value; out contiguous.
template <class T>
void launch_arange(T* out, int64_t n, double start, double step);
// The draws of core/ops/factory.cpp, element for element: out contiguous. A 16-bit draw is the
// float32 draw rounded (uniform ones towards zero, so they stay below 1).
template <class T>
void launch_uniform(T* out, int64_t n, PhiloxState state);
template <class T>
void launch_normal(T* out, int64_t n, PhiloxState state);
template <class T>
void launch_randint(T* out, int64_t n, int64_t low, uint64_t range, PhiloxState state);

}  // namespace ember::cuda
