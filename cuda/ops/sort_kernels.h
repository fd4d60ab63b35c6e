// Launcher of the sort kernel (cuda/ops/sort.cu) on raw pointers: the first k of every sorted row
// of x [rows, length] (contiguous) into values and indices [rows, k]. Stable; NaN sorts as
// the largest value. Every dtype: float, double, int64_t, bool, __nv_bfloat16 and __half, as
// on the CPU.
#pragma once

#include <cstdint>

namespace ember::cuda {

template <class T>
void launch_sort(const T* x, T* values, int64_t* indices, int64_t rows, int64_t length, int64_t k, bool descending);

}  // namespace ember::cuda
