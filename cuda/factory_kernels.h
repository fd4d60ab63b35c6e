// The device side of the factories (cuda/factory.cu): fill, arange and the Philox draws.
// fmt-free.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "cuda/half_elements.h"
#include "cuda/strided_layout.h"

namespace ember::cuda {

// Every launcher takes T = float, double, __nv_bfloat16 or __half; fill, arange and randint also
// int64_t, fill also bool. A 16-bit value is computed as float32's (or double's) and rounded to
// nearest even on store.
//
// out[i] = value over a strided layout (fill_ writes into views); a 16-bit value is rounded once.
template <class T>
void launch_fill(const StridedLayout<1>& layout, int64_t n, T* out, compute_t<T> value);
// out[i] = start + i * step in double, then converted; out contiguous.
template <class T>
void launch_arange(T* out, int64_t n, double start, double step);
// The draws of core/ops/factory.cpp, element for element: out contiguous. A 16-bit draw is the
// float32 draw, rounded.
template <class T>
void launch_uniform(T* out, int64_t n, PhiloxState state);
template <class T>
void launch_normal(T* out, int64_t n, PhiloxState state);
template <class T>
void launch_randint(T* out, int64_t n, int64_t low, int64_t range, PhiloxState state);

}  // namespace ember::cuda
