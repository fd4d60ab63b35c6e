// Registers the CUDA softmax and log_softmax kernels (cuda/softmax.cu) into core's tables:
// core/ops/softmax.cpp has already made the input contiguous and worked out its layout.
#include "core/ops/softmax.h"
#include "cuda/softmax_kernels.h"

namespace ember::cuda {
namespace {

void softmax_cuda(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  visit_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>() {
    launch_softmax_forward<T>(x.data_ptr<T>(), out.data_ptr<T>(), outer, n, inner, log);
  });
}
EMBER_REGISTER_KERNEL(kernels::softmax, DeviceType::CUDA, softmax_cuda);

void softmax_backward_cuda(const Tensor& grad_x, const Tensor& grad_y, const Tensor& y, int64_t outer, int64_t n,
                           int64_t inner, bool log) {
  visit_floating(y.dtype(), log ? "log_softmax" : "softmax", [&]<class T>() {
    launch_softmax_backward<T>(grad_y.data_ptr<T>(), y.data_ptr<T>(), grad_x.data_ptr<T>(), outer, n, inner, log);
  });
}
EMBER_REGISTER_KERNEL(kernels::softmax_backward, DeviceType::CUDA, softmax_backward_cuda);

}  // namespace
}  // namespace ember::cuda
