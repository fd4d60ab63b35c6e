// The CUDA entry of the binary kernel table (kernels in cuda/binary.cu). core has checked the
// operands (same dtype and device, broadcastable); out may alias a (in-place ops).
#include "core/ops/elementwise.h"
#include "cuda/binary_kernels.h"
#include "cuda/tensor_layout.h"

namespace ember::cuda {
namespace {

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const StridedLayout<3> layout = strided_layout<3>(binary_op_name(op), {&out, &a, &b});
  if (out.dtype() == kBool) {
    visit_dtype(a.dtype(), binary_op_name(op), [&]<class T>() {
      launch_binary_predicate<T>(op, layout, out.numel(), out.data_ptr<bool>(), a.data_ptr<T>(), b.data_ptr<T>());
    });
    return;
  }
  visit_numeric(a.dtype(), binary_op_name(op), [&]<class T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      if (op == BinaryOp::Div || op == BinaryOp::Pow) fail("{}: not defined for {}", binary_op_name(op), a.dtype());
    }
    launch_binary_arithmetic<T>(op, layout, out.numel(), out.data_ptr<T>(), a.data_ptr<T>(), b.data_ptr<T>());
  });
}
EMBER_REGISTER_KERNEL(kernels::binary, DeviceType::CUDA, binary_cuda);

}  // namespace
}  // namespace ember::cuda
