// Host side of the 16-bit element types (cuda/common/half_elements.h): which device type a launcher is
// instantiated for, given the C++ type a dtype switch (core/dtype.h's visit_any_*) hands over.
// ember's BFloat16 and Float16 hold the very bits CUDA's __nv_bfloat16 and __half hold (IEEE
// binary16, and float32's top 16 bits), in 2 bytes with 2-byte alignment, so a tensor's data
// pointer is reinterpreted, never converted. Host compiler only (core/half.h is C++20).
#pragma once

#include <type_traits>

#include "core/half.h"
#include "core/tensor.h"
#include "cuda/common/half_elements.h"

namespace ember::cuda {

static_assert(sizeof(BFloat16) == sizeof(__nv_bfloat16) && alignof(BFloat16) == alignof(__nv_bfloat16),
              "BFloat16 and __nv_bfloat16 share their layout");
static_assert(sizeof(Float16) == sizeof(__half) && alignof(Float16) == alignof(__half),
              "Float16 and __half share their layout");

template <class T>
struct DeviceElement {
  using type = T;
};
template <>
struct DeviceElement<BFloat16> {
  using type = __nv_bfloat16;
};
template <>
struct DeviceElement<Float16> {
  using type = __half;
};

// The device type of host element type T: __nv_bfloat16, __half, or T itself.
template <class T>
using device_element_t = typename DeviceElement<T>::type;

// t's elements, of host type T, as the device type the kernels take.
template <class T>
device_element_t<T>* device_data(const Tensor& t) {
  return reinterpret_cast<device_element_t<T>*>(t.data_ptr<T>());
}

}  // namespace ember::cuda
