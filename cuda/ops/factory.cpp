// The CUDA entries of the factory kernel tables (fill, arange, rand, randn, randint). The
// kernels are in cuda/ops/factory.cu; here dtypes become C++ types, as in core/ops/factory.cpp.
#include "core/ops/factory.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/factory_kernels.h"
#include "cuda/ops/tensor_layout.h"

namespace ember::cuda {
namespace {

void fill_cuda(const Tensor& out, double value) {
  const StridedLayout<1> layout = strided_layout<1>("fill", {&out});
  visit_any_dtype(out.dtype(), [&]<class T>() {
    launch_fill<device_element_t<T>>(layout, out.numel(), device_data<T>(out), value);
  });
}

// The factories below write tensors they have just made, which are contiguous.
void arange_cuda(const Tensor& out, double start, double step) {
  visit_any_numeric(out.dtype(), "arange", [&]<class T>() {
    launch_arange<device_element_t<T>>(device_data<T>(out), out.numel(), start, step);
  });
}

void uniform_cuda(const Tensor& out, PhiloxState state) {
  visit_any_floating(out.dtype(), "rand",
                     [&]<class T>() { launch_uniform<device_element_t<T>>(device_data<T>(out), out.numel(), state); });
}

void normal_cuda(const Tensor& out, PhiloxState state) {
  visit_any_floating(out.dtype(), "randn",
                     [&]<class T>() { launch_normal<device_element_t<T>>(device_data<T>(out), out.numel(), state); });
}

void randint_cuda(const Tensor& out, int64_t low, uint64_t range, PhiloxState state) {
  visit_any_numeric(out.dtype(), "randint", [&]<class T>() {
    launch_randint<device_element_t<T>>(device_data<T>(out), out.numel(), low, range, state);
  });
}

EMBER_REGISTER_KERNEL(kernels::fill, DeviceType::CUDA, fill_cuda);
EMBER_REGISTER_KERNEL(kernels::arange, DeviceType::CUDA, arange_cuda);
EMBER_REGISTER_KERNEL(kernels::uniform, DeviceType::CUDA, uniform_cuda);
EMBER_REGISTER_KERNEL(kernels::normal, DeviceType::CUDA, normal_cuda);
EMBER_REGISTER_KERNEL(kernels::randint, DeviceType::CUDA, randint_cuda);

}  // namespace
}  // namespace ember::cuda
