// Registers the fused CUDA cross_entropy kernels (cuda/ops/cross_entropy.cu) into core's tables;
// core/ops/cross_entropy.cpp has made the logits contiguous and checked every target. For 16-bit
// logits it keeps the per-row values (losses, row_max, log_sum, row_scale) in float32.
#include "core/ops/cross_entropy.h"
#include "cuda/ops/cross_entropy_kernels.h"
#include "cuda/ops/device_elements.h"

namespace ember::cuda {
namespace {

void cross_entropy_cuda(const Tensor& losses, const Tensor& row_max, const Tensor& log_sum, const Tensor& logits,
                        const Tensor& targets, int64_t ignore_index, double label_smoothing) {
  visit_any_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    using C = compute_type<T>;
    launch_cross_entropy_forward<device_element_t<T>>(device_data<T>(logits), targets.data_ptr<int64_t>(),
                                                      losses.data_ptr<C>(), row_max.data_ptr<C>(),
                                                      log_sum.data_ptr<C>(), targets.numel(), logits.size(-1),
                                                      ignore_index, label_smoothing);
  });
}
EMBER_REGISTER_KERNEL(kernels::cross_entropy, DeviceType::CUDA, cross_entropy_cuda);

void cross_entropy_backward_cuda(const Tensor& grad_logits, const Tensor& row_scale, const Tensor& logits,
                                 const Tensor& targets, const Tensor& row_max, const Tensor& log_sum,
                                 int64_t ignore_index, double label_smoothing) {
  visit_any_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    using C = compute_type<T>;
    launch_cross_entropy_backward<device_element_t<T>>(device_data<T>(logits), targets.data_ptr<int64_t>(),
                                                       row_max.data_ptr<C>(), log_sum.data_ptr<C>(),
                                                       row_scale.data_ptr<C>(), device_data<T>(grad_logits),
                                                       targets.numel(), logits.size(-1), ignore_index,
                                                       label_smoothing);
  });
}
EMBER_REGISTER_KERNEL(kernels::cross_entropy_backward, DeviceType::CUDA, cross_entropy_backward_cuda);

}  // namespace
}  // namespace ember::cuda
