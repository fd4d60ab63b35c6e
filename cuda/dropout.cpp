// Registers the CUDA dropout kernel (cuda/dropout.cu) for dropout and its backward, which
// regenerates the forward's mask from the saved Philox state (see core/ops/dropout.cpp).
#include "core/ops/dropout.h"
#include "cuda/dropout_kernels.h"

namespace ember::cuda {
namespace {

void dropout_cuda(const Tensor& out, const Tensor& x, double p, PhiloxState state) {
  visit_floating(x.dtype(), "dropout", [&]<class T>() {
    launch_dropout<T>(x.data_ptr<T>(), out.data_ptr<T>(), x.numel(), p, state);
  });
}
EMBER_REGISTER_KERNEL(kernels::dropout, DeviceType::CUDA, dropout_cuda);
EMBER_REGISTER_KERNEL(kernels::dropout_backward, DeviceType::CUDA, dropout_cuda);

}  // namespace
}  // namespace ember::cuda
