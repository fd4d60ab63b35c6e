// The CUDA entries of the unary and clamp kernel tables (kernels in cuda/ops/unary.cu). The dtype
// rules are core/ops/unary.cpp's: math functions on floating point (bfloat16 and float16
// computed in float, rounded once on store), Neg/Abs/Relu/Sign and clamp on int64 too, the
// predicates on every dtype.
#include <limits>

#include "core/ops/clamp_bounds.h"
#include "core/ops/unary.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/tensor_layout.h"
#include "cuda/ops/unary_kernels.h"

namespace ember::cuda {
namespace {

bool takes_integers(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Relu || op == UnaryOp::Sign;
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& x) {
  const StridedLayout<2> layout = strided_layout<2>(unary_op_name(op), {&out, &x});
  if (op == UnaryOp::IsFinite || op == UnaryOp::IsNan) {
    visit_any_dtype(x.dtype(), [&]<class T>() {
      launch_unary_predicate<device_element_t<T>>(op, layout, out.numel(), out.data_ptr<bool>(), device_data<T>(x));
    });
    return;
  }
  visit_any_numeric(x.dtype(), unary_op_name(op), [&]<class T>() {
    if constexpr (!is_floating_element<T>) {
      if (!takes_integers(op)) fail("{}: not defined for {}", unary_op_name(op), x.dtype());
    }
    launch_unary<device_element_t<T>>(op, layout, out.numel(), device_data<T>(out), device_data<T>(x));
  });
}
EMBER_REGISTER_KERNEL(kernels::unary, DeviceType::CUDA, unary_cuda);

void clamp_cuda(const Tensor& out, const Tensor& x, std::optional<double> min, std::optional<double> max) {
  const StridedLayout<2> layout = strided_layout<2>("clamp", {&out, &x});
  visit_any_numeric(x.dtype(), "clamp", [&]<class T>() {
    // The bounds in the compute type: a 16-bit x is compared in float, and its result rounded.
    using C = compute_type<T>;
    const C low = min ? static_cast<C>(*min) : absent_lower_bound<C>();
    const C high = max ? static_cast<C>(*max) : absent_upper_bound<C>();
    launch_clamp<device_element_t<T>>(layout, out.numel(), device_data<T>(out), device_data<T>(x), low, high);
  });
}
EMBER_REGISTER_KERNEL(kernels::clamp, DeviceType::CUDA, clamp_cuda);

// The fused backward of relu and gelu (core/ops/unary.cpp): grad_x = grad * f'(x), one pass.
void activation_backward_cuda(UnaryOp op, const Tensor& grad_x, const Tensor& grad, const Tensor& x) {
  const StridedLayout<3> layout = strided_layout<3>(unary_op_name(op), {&grad_x, &grad, &x});
  visit_any_floating(x.dtype(), unary_op_name(op), [&]<class T>() {
    launch_activation_backward<device_element_t<T>>(op, layout, grad_x.numel(), device_data<T>(grad_x),
                                                    device_data<T>(grad), device_data<T>(x));
  });
}
EMBER_REGISTER_KERNEL(kernels::activation_backward, DeviceType::CUDA, activation_backward_cuda);

}  // namespace
}  // namespace ember::cuda
