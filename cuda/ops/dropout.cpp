// Registers the CUDA dropout kernel (cuda/ops/dropout.cu) for dropout and its backward, which
// regenerates the forward's mask from the saved Philox state (see core/ops/dropout.cpp).
#include "core/ops/dropout.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/dropout_kernels.h"

namespace ember::cuda {
namespace {

void dropout_cuda(const Tensor& out, const Tensor& x, double p, PhiloxState state) {
  visit_any_floating(x.dtype(), "dropout", [&]<class T>() {
    launch_dropout<device_element_t<T>>(device_data<T>(x), device_data<T>(out), x.numel(), p, state);
  });
}
EMBER_REGISTER_KERNEL(kernels::dropout, DeviceType::CUDA, dropout_cuda);
EMBER_REGISTER_KERNEL(kernels::dropout_backward, DeviceType::CUDA, dropout_cuda);

}  // namespace
}  // namespace ember::cuda
