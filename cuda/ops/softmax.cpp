// Registers the CUDA softmax and log_softmax kernels (cuda/ops/softmax.cu) into core's tables:
// core/ops/softmax.cpp has already made the input contiguous and worked out its layout.
#include "core/ops/softmax.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/softmax_kernels.h"

namespace ember::cuda {
namespace {

void softmax_cuda(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  visit_any_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>() {
    launch_softmax_forward<device_element_t<T>>(device_data<T>(x), device_data<T>(out), outer, n, inner, log);
  });
}
EMBER_REGISTER_KERNEL(kernels::softmax, DeviceType::CUDA, softmax_cuda);

void softmax_backward_cuda(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t outer, int64_t n,
                           int64_t inner, bool log) {
  visit_any_floating(y.dtype(), log ? "log_softmax" : "softmax", [&]<class T>() {
    launch_softmax_backward<device_element_t<T>>(device_data<T>(grad_y), device_data<T>(y), device_data<T>(grad_x),
                                                 outer, n, inner, log);
  });
}
EMBER_REGISTER_KERNEL(kernels::softmax_backward, DeviceType::CUDA, softmax_backward_cuda);

}  // namespace
}  // namespace ember::cuda
