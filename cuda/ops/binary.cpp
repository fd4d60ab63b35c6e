// The CUDA entry of the binary kernel table (kernels in cuda/ops/binary.cu). core has checked the
// operands (same dtype and device, broadcastable); out may alias a (in-place ops).
#include "core/ops/elementwise.h"
#include "cuda/ops/binary_kernels.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/tensor_layout.h"

namespace ember::cuda {
namespace {

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const StridedLayout<3> layout = strided_layout<3>(binary_op_name(op), {&out, &a, &b});
  if (out.dtype() == kBool) {
    visit_any_dtype(a.dtype(), [&]<class T>() {
      launch_binary_predicate<device_element_t<T>>(op, layout, out.numel(), out.data_ptr<bool>(), device_data<T>(a),
                                                   device_data<T>(b));
    });
    return;
  }
  visit_any_numeric(a.dtype(), binary_op_name(op), [&]<class T>() {
    if constexpr (!is_floating_element<T>) {
      if (op == BinaryOp::Div || op == BinaryOp::Pow) fail("{}: not defined for {}", binary_op_name(op), a.dtype());
    }
    launch_binary_arithmetic<device_element_t<T>>(op, layout, out.numel(), device_data<T>(out), device_data<T>(a),
                                                  device_data<T>(b));
  });
}
EMBER_REGISTER_KERNEL(kernels::binary, DeviceType::CUDA, binary_cuda);

}  // namespace
}  // namespace ember::cuda
