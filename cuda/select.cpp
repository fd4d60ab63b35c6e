// The CUDA entries of the where and triangle kernel tables (kernels in cuda/select.cu). With
// them, where, masked_fill, tril and triu, and their backwards, run on the GPU.
#include "core/ops/indexing.h"
#include "cuda/select_kernels.h"
#include "cuda/tensor_layout.h"

namespace ember::cuda {
namespace {

void where_cuda(const Tensor& out, const Tensor& condition, const Tensor& a, const Tensor& b) {
  const StridedLayout<4> layout = strided_layout<4>("where", {&out, &condition, &a, &b});
  visit_dtype(out.dtype(), "where", [&]<class T>() {
    launch_where<T>(layout, out.numel(), out.data_ptr<T>(), condition.data_ptr<bool>(), a.data_ptr<T>(),
                    b.data_ptr<T>());
  });
}
EMBER_REGISTER_KERNEL(kernels::where, DeviceType::CUDA, where_cuda);

// core hands over x contiguous and a fresh contiguous out.
void triangle_cuda(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower) {
  const int64_t rows = x.sizes()[x.dim() - 2], cols = x.sizes()[x.dim() - 1];
  visit_dtype(x.dtype(), "triangle", [&]<class T>() {
    launch_triangle<T>(out.data_ptr<T>(), x.data_ptr<T>(), x.numel(), rows, cols, diagonal, lower);
  });
}
EMBER_REGISTER_KERNEL(kernels::triangle, DeviceType::CUDA, triangle_cuda);

}  // namespace
}  // namespace ember::cuda
