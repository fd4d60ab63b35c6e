// Registers the CUDA sort kernel (cuda/ops/sort.cu) behind sort, argsort and topk; core/ops/sort.cpp
// has moved the sorted dim last and made the rows contiguous.
#include "core/ops/sort.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/sort_kernels.h"

namespace ember::cuda {
namespace {

void sort_cuda(const Tensor& values, const Tensor& indices, const Tensor& x, bool descending) {
  if (values.numel() == 0) return;
  const int64_t length = x.sizes().back(), k = values.sizes().back();
  // Every dtype, bool included: the CPU kernel sorts them all, so argsort of a mask works on both.
  visit_any_dtype(x.dtype(), [&]<class T>() {
    launch_sort<device_element_t<T>>(device_data<T>(x), device_data<T>(values), indices.data_ptr<int64_t>(),
                                     x.numel() / length, length, k, descending);
  });
}
EMBER_REGISTER_KERNEL(kernels::sort, DeviceType::CUDA, sort_cuda);

}  // namespace
}  // namespace ember::cuda
