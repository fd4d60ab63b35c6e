// The device side of the factories (cuda/factory.cu): fill, arange and the Philox draws.
// fmt-free.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "cuda/strided_layout.h"

namespace ember::cuda {

// out[i] = value over a strided layout (fill_ writes into views). T: float, double, int64_t, bool.
template <class T>
void launch_fill(const StridedLayout<1>& layout, int64_t n, T* out, T value);
// out[i] = start + i * step in double, then converted; out contiguous. T: float, double, int64_t.
template <class T>
void launch_arange(T* out, int64_t n, double start, double step);
// The draws of core/ops/factory.cpp, element for element: out contiguous. T: float, double.
template <class T>
void launch_uniform(T* out, int64_t n, PhiloxState state);
template <class T>
void launch_normal(T* out, int64_t n, PhiloxState state);
// T: float, double, int64_t.
template <class T>
void launch_randint(T* out, int64_t n, int64_t low, int64_t range, PhiloxState state);

}  // namespace ember::cuda
