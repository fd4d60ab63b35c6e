// Registers the CUDA layer_norm kernels (cuda/ops/layer_norm.cu) into core's tables; the op in
// core/ops/layer_norm.cpp has made every operand contiguous and checked the shapes. For 16-bit x
// it keeps mean and rstd in float32.
#include "core/ops/layer_norm.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/layer_norm_kernels.h"

namespace ember::cuda {
namespace {

// The data of an optional tensor, as the kernels' element type: nullptr when undefined.
template <class T>
device_element_t<T>* data_or_null(const Tensor& x) {
  return x.defined() ? device_data<T>(x) : nullptr;
}

void layer_norm_cuda(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                     const Tensor& bias, double eps) {
  const int64_t rows = mean.numel(), n = rows == 0 ? 0 : x.numel() / rows;
  visit_any_floating(x.dtype(), "layer_norm", [&]<class T>() {
    using C = compute_type<T>;
    launch_layer_norm_forward<device_element_t<T>>(device_data<T>(x), data_or_null<T>(weight), data_or_null<T>(bias),
                                                   device_data<T>(y), mean.data_ptr<C>(), rstd.data_ptr<C>(), rows, n,
                                                   eps);
  });
}
EMBER_REGISTER_KERNEL(kernels::layer_norm, DeviceType::CUDA, layer_norm_cuda);

void layer_norm_backward_cuda(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                              const Tensor& grad_y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight) {
  const int64_t rows = mean.numel(), n = rows == 0 ? 0 : x.numel() / rows;
  // The partial sums of grad_weight and grad_bias, from the caching allocator. It may be freed as
  // soon as the kernels are queued: the next op to get the block queues behind them on the one stream.
  Tensor scratch;
  if ((grad_weight.defined() || grad_bias.defined()) && rows > 0 && n > 0) {
    scratch = make_tensor({layer_norm_backward_scratch_elements(rows, n)}, kFloat64, x.device());
  }
  visit_any_floating(x.dtype(), "layer_norm", [&]<class T>() {
    using C = compute_type<T>;
    launch_layer_norm_backward<device_element_t<T>>(
        device_data<T>(grad_y), device_data<T>(x), mean.data_ptr<C>(), rstd.data_ptr<C>(), data_or_null<T>(weight),
        data_or_null<T>(grad_x), data_or_null<T>(grad_weight), data_or_null<T>(grad_bias),
        scratch.defined() ? scratch.data_ptr<double>() : nullptr, rows, n);
  });
}
EMBER_REGISTER_KERNEL(kernels::layer_norm_backward, DeviceType::CUDA, layer_norm_backward_cuda);

}  // namespace
}  // namespace ember::cuda
