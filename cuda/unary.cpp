// The CUDA entries of the unary and clamp kernel tables (kernels in cuda/unary.cu). The dtype
// rules are core/ops/unary.cpp's: math functions on floating point, Neg/Abs/Relu/Sign and
// clamp on int64 too, the predicates on every dtype.
#include <limits>

#include "core/ops/unary.h"
#include "cuda/tensor_layout.h"
#include "cuda/unary_kernels.h"

namespace ember::cuda {
namespace {

bool takes_integers(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Relu || op == UnaryOp::Sign;
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& x) {
  const StridedLayout<2> layout = strided_layout<2>(unary_op_name(op), {&out, &x});
  if (op == UnaryOp::IsFinite || op == UnaryOp::IsNan) {
    visit_dtype(x.dtype(), unary_op_name(op), [&]<class T>() {
      launch_unary_predicate<T>(op, layout, out.numel(), out.data_ptr<bool>(), x.data_ptr<T>());
    });
    return;
  }
  visit_numeric(x.dtype(), unary_op_name(op), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      if (!takes_integers(op)) fail("{}: not defined for {}", unary_op_name(op), x.dtype());
    }
    launch_unary<T>(op, layout, out.numel(), out.data_ptr<T>(), x.data_ptr<T>());
  });
}
EMBER_REGISTER_KERNEL(kernels::unary, DeviceType::CUDA, unary_cuda);

void clamp_cuda(const Tensor& out, const Tensor& x, std::optional<double> min, std::optional<double> max) {
  const StridedLayout<2> layout = strided_layout<2>("clamp", {&out, &x});
  visit_numeric(x.dtype(), "clamp", [&]<class T>() {
    const T low = min ? static_cast<T>(*min) : std::numeric_limits<T>::lowest();
    const T high = max ? static_cast<T>(*max) : std::numeric_limits<T>::max();
    launch_clamp<T>(layout, out.numel(), out.data_ptr<T>(), x.data_ptr<T>(), low, high);
  });
}
EMBER_REGISTER_KERNEL(kernels::clamp, DeviceType::CUDA, clamp_cuda);

// The fused backward of relu and gelu (core/ops/unary.cpp): grad_x = grad * f'(x), one pass.
void activation_backward_cuda(UnaryOp op, const Tensor& grad_x, const Tensor& grad, const Tensor& x) {
  const StridedLayout<3> layout = strided_layout<3>(unary_op_name(op), {&grad_x, &grad, &x});
  visit_floating(x.dtype(), unary_op_name(op), [&]<class T>() {
    launch_activation_backward<T>(op, layout, grad_x.numel(), grad_x.data_ptr<T>(), grad.data_ptr<T>(),
                                  x.data_ptr<T>());
  });
}
EMBER_REGISTER_KERNEL(kernels::activation_backward, DeviceType::CUDA, activation_backward_cuda);

}  // namespace
}  // namespace ember::cuda
