// The CUDA entries of the reduction kernel tables (kernels in cuda/ops/reduce.cu). The input is
// brought to the [outer, reduce, inner] form by the same reduction_layout the CPU kernels use:
// it only views, permutes and copies, so on a CUDA tensor it runs on the GPU.
#include "core/cpu/reduction_layout.h"
#include "core/ops/reduce.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/reduce_kernels.h"

namespace ember::cuda {
namespace {

// The device scratch of a split reduction (cuda/ops/reduce_kernels.h), from the caching allocator;
// undefined when the reduction is not split. It may be freed as soon as the kernels are queued:
// the next op to get the block queues behind them on the one stream.
Tensor split_scratch(const cpu::ReductionLayout& layout) {
  const int64_t bytes = reduce_scratch_bytes(layout.outer, layout.reduce, layout.inner);
  if (bytes == 0) return {};
  return make_tensor({(bytes + 7) / 8}, kFloat64, layout.source.device());
}

void* scratch_pointer(const Tensor& scratch) { return scratch.defined() ? scratch.data_ptr<double>() : nullptr; }

void sum_cuda(const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  // Down columns (a bias's gradient, summed over every row of a batch): by groups of columns,
  // whose reads coalesce.
  if (layout.outer == 1 && layout.inner > 1 && layout.reduce > 0 && is_floating_point(x.dtype())) {
    const Tensor scratch =
        make_tensor({column_sum_scratch_elements(layout.reduce, layout.inner)}, kFloat64, layout.source.device());
    visit_any_floating(x.dtype(), "sum", [&]<class T>() {
      launch_column_sum<device_element_t<T>>(device_data<T>(layout.source), device_data<T>(out), layout.reduce,
                                             layout.inner, scratch.data_ptr<double>());
    });
    return;
  }
  const Tensor scratch = split_scratch(layout);
  visit_any_numeric(x.dtype(), "sum", [&]<class T>() {
    launch_sum<device_element_t<T>>(device_data<T>(layout.source), device_data<T>(out), layout.outer, layout.reduce,
                                    layout.inner, scratch_pointer(scratch));
  });
}
EMBER_REGISTER_KERNEL(kernels::sum, DeviceType::CUDA, sum_cuda);

void variance_cuda(const Tensor& out, const Tensor& x, const std::vector<bool>& mask, int64_t correction) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  const Tensor scratch = split_scratch(layout);
  visit_any_floating(x.dtype(), "var", [&]<class T>() {
    launch_variance<device_element_t<T>>(device_data<T>(layout.source), device_data<T>(out), layout.outer,
                                         layout.reduce, layout.inner, correction, scratch_pointer(scratch));
  });
}
EMBER_REGISTER_KERNEL(kernels::variance, DeviceType::CUDA, variance_cuda);

void logsumexp_cuda(const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  const Tensor scratch = split_scratch(layout);
  visit_any_floating(x.dtype(), "logsumexp", [&]<class T>() {
    launch_logsumexp<device_element_t<T>>(device_data<T>(layout.source), device_data<T>(out), layout.outer,
                                          layout.reduce, layout.inner, scratch_pointer(scratch));
  });
}
EMBER_REGISTER_KERNEL(kernels::logsumexp, DeviceType::CUDA, logsumexp_cuda);

void extremum_cuda(Extremum which, const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  const Tensor scratch = split_scratch(layout);
  visit_any_numeric(x.dtype(), which == Extremum::Max ? "amax" : "amin", [&]<class T>() {
    launch_extremum<device_element_t<T>>(which, device_data<T>(layout.source), device_data<T>(out), nullptr,
                                         layout.outer, layout.reduce, layout.inner, scratch_pointer(scratch));
  });
}
EMBER_REGISTER_KERNEL(kernels::extremum, DeviceType::CUDA, extremum_cuda);

void extremum_index_cuda(Extremum which, const Tensor& values, const Tensor& indices, const Tensor& x,
                         const std::vector<bool>& mask) {
  const cpu::ReductionLayout layout = cpu::reduction_layout(x, mask);
  const Tensor scratch = split_scratch(layout);
  visit_any_numeric(x.dtype(), which == Extremum::Max ? "argmax" : "argmin", [&]<class T>() {
    launch_extremum<device_element_t<T>>(which, device_data<T>(layout.source),
                                         values.defined() ? device_data<T>(values) : nullptr,
                                         indices.data_ptr<int64_t>(), layout.outer, layout.reduce, layout.inner,
                                         scratch_pointer(scratch));
  });
}
EMBER_REGISTER_KERNEL(kernels::extremum_index, DeviceType::CUDA, extremum_index_cuda);

}  // namespace
}  // namespace ember::cuda
