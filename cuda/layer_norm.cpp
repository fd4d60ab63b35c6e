// Registers the CUDA layer_norm kernels (cuda/layer_norm.cu) into core's tables; the op in
// core/ops/layer_norm.cpp has made every operand contiguous and checked the shapes.
#include "core/ops/layer_norm.h"
#include "cuda/layer_norm_kernels.h"

namespace ember::cuda {
namespace {

// The data of an optional tensor: nullptr when undefined.
template <class T>
T* data_or_null(const Tensor& x) {
  return x.defined() ? x.data_ptr<T>() : nullptr;
}

void layer_norm_cuda(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                     const Tensor& bias, double eps) {
  const int64_t rows = mean.numel(), n = rows == 0 ? 0 : x.numel() / rows;
  visit_floating(x.dtype(), "layer_norm", [&]<class T>() {
    launch_layer_norm_forward<T>(x.data_ptr<T>(), data_or_null<T>(weight), data_or_null<T>(bias), y.data_ptr<T>(),
                                 mean.data_ptr<T>(), rstd.data_ptr<T>(), rows, n, eps);
  });
}
EMBER_REGISTER_KERNEL(kernels::layer_norm, DeviceType::CUDA, layer_norm_cuda);

void layer_norm_backward_cuda(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                              const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight) {
  const int64_t rows = mean.numel(), n = rows == 0 ? 0 : x.numel() / rows;
  visit_floating(x.dtype(), "layer_norm", [&]<class T>() {
    launch_layer_norm_backward<T>(grad_y.data_ptr<T>(), x.data_ptr<T>(), mean.data_ptr<T>(), rstd.data_ptr<T>(),
                                  data_or_null<T>(weight), data_or_null<T>(grad_x), data_or_null<T>(grad_weight),
                                  data_or_null<T>(grad_bias), rows, n);
  });
}
EMBER_REGISTER_KERNEL(kernels::layer_norm_backward, DeviceType::CUDA, layer_norm_backward_cuda);

}  // namespace
}  // namespace ember::cuda
