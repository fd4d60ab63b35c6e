// Registers the CUDA unscale of gradients (cuda/ops/grad_unscale.cu) into core's table
// (core/ops/grad_unscale.h): the gradients packed into lists per dtype (cuda/ops/tensor_lists.h),
// one launch per list, the flag a 0-d float32 on the device. No host wait: GradScaler reads the
// flag once, after every device's launches.
#include "core/ops/copy.h"
#include "core/ops/grad_unscale.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/grad_unscale_kernels.h"
#include "cuda/ops/tensor_lists.h"

namespace ember::cuda {
namespace {

void unscale_grads_cuda(std::span<const Tensor> grads, double inverse_scale, const Tensor& found_inf) {
  // A strided gradient is unscaled in a contiguous copy, copied back after the launches.
  std::vector<Tensor> dense;
  std::vector<bool> copied;
  for (const Tensor& grad : grads) {
    copied.push_back(!grad.is_contiguous());
    dense.push_back(copied.back() ? contiguous(grad) : grad);
  }
  float* const found = found_inf.data_ptr<float>();
  for (const DType dtype : kFloatingDTypes) {
    visit_any_floating(dtype, "unscale_grads", [&]<class T>() {
      using Element = device_element_t<T>;
      in_lists<UnscaleTensorList<Element>>(
          dense, dtype,
          [&](UnscaleTensorList<Element>& list, size_t i) {
            list.grads[list.count] = device_data<T>(dense[i]);
            list.sizes[list.count] = dense[i].numel();
          },
          [&](const UnscaleTensorList<Element>& list) {
            launch_unscale_grads<Element>(list, inverse_scale, found);
          });
    });
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!copied[i]) continue;
    Tensor target = grads[i];
    target.copy_(dense[i]);
  }
}
EMBER_REGISTER_KERNEL(kernels::unscale_grads, DeviceType::CUDA, unscale_grads_cuda);

}  // namespace
}  // namespace ember::cuda
