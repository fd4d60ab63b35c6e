// The CUDA entries of the where and triangle kernel tables (kernels in cuda/ops/select.cu). With
// them, where, masked_fill, tril and triu, and their backwards, run on the GPU.
#include "core/ops/indexing.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/select_kernels.h"
#include "cuda/ops/tensor_layout.h"

namespace ember::cuda {
namespace {

void where_cuda(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  const StridedLayout<4> layout = strided_layout<4>("where", {&out, &condition, &a, &b});
  visit_any_dtype(out.dtype(), [&]<class T>() {
    launch_where<device_element_t<T>>(layout, out.numel(), device_data<T>(out), condition.data_ptr<bool>(),
                                      device_data<T>(a), device_data<T>(b));
  });
}
EMBER_REGISTER_KERNEL(kernels::where, DeviceType::CUDA, where_cuda);

// core hands over x contiguous and a fresh contiguous out.
void triangle_cuda(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower) {
  const int64_t rows = x.sizes()[x.dim() - 2], cols = x.sizes()[x.dim() - 1];
  visit_any_dtype(x.dtype(), [&]<class T>() {
    launch_triangle<device_element_t<T>>(device_data<T>(out), device_data<T>(x), x.numel(), rows, cols, diagonal,
                                         lower);
  });
}
EMBER_REGISTER_KERNEL(kernels::triangle, DeviceType::CUDA, triangle_cuda);

}  // namespace
}  // namespace ember::cuda
