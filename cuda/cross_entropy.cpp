// Registers the fused CUDA cross_entropy kernels (cuda/cross_entropy.cu) into core's tables;
// core/ops/cross_entropy.cpp has made the logits contiguous and checked every target.
#include "core/ops/cross_entropy.h"
#include "cuda/cross_entropy_kernels.h"

namespace ember::cuda {
namespace {

void cross_entropy_cuda(const Tensor& losses, const Tensor& row_max, const Tensor& log_sum, const Tensor& logits,
                        const Tensor& targets, int64_t ignore_index, double label_smoothing) {
  visit_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    launch_cross_entropy_forward<T>(logits.data_ptr<T>(), targets.data_ptr<int64_t>(), losses.data_ptr<T>(),
                                    row_max.data_ptr<T>(), log_sum.data_ptr<T>(), targets.numel(), logits.size(-1),
                                    ignore_index, label_smoothing);
  });
}
EMBER_REGISTER_KERNEL(kernels::cross_entropy, DeviceType::CUDA, cross_entropy_cuda);

void cross_entropy_backward_cuda(const Tensor& grad_logits, const Tensor& row_scale, const Tensor& logits,
                                 const Tensor& targets, const Tensor& row_max, const Tensor& log_sum,
                                 int64_t ignore_index, double label_smoothing) {
  visit_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    launch_cross_entropy_backward<T>(logits.data_ptr<T>(), targets.data_ptr<int64_t>(), row_max.data_ptr<T>(),
                                     log_sum.data_ptr<T>(), row_scale.data_ptr<T>(), grad_logits.data_ptr<T>(),
                                     targets.numel(), logits.size(-1), ignore_index, label_smoothing);
  });
}
EMBER_REGISTER_KERNEL(kernels::cross_entropy_backward, DeviceType::CUDA, cross_entropy_backward_cuda);

}  // namespace
}  // namespace ember::cuda
