// Registers the fused CUDA optimizer steps (cuda/ops/optimizer_steps.cu) into core's tables
// (core/ops/optimizer_steps.h): it packs the parameters of a step into lists of
// kTensorsPerLaunch, one list per dtype, and launches one kernel per list (cuda/ops/tensor_lists.h). A parameter's
// gradient and state are of its dtype (16-bit ones included).
#include "core/ops/copy.h"
#include "core/ops/factory.h"
#include "core/ops/optimizer_steps.h"
#include "cuda/ops/device_elements.h"
#include "cuda/ops/optimizer_steps_kernels.h"
#include "cuda/ops/tensor_lists.h"

namespace ember::cuda {
namespace {

void adam_step_cuda(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
                    std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> steps, const Tensor& lr,
                    const AdamStepOptions& options) {
  // A gradient may be strided (an op's backward can produce a view); the copy is the rare case.
  std::vector<Tensor> dense_grads;
  for (size_t i = 0; i < params.size(); ++i) {
    check_contiguous("adam_step", params[i], "parameter", i);
    check_contiguous("adam_step", exp_avgs[i], "exp_avg of parameter", i);
    check_contiguous("adam_step", exp_avg_sqs[i], "exp_avg_sq of parameter", i);
    dense_grads.push_back(contiguous(grads[i]));
  }
  const AdamHyperParameters hyper{lr.data_ptr<double>(), options.beta1,        options.beta2,
                                  options.eps,           options.weight_decay, options.decoupled_weight_decay};
  for (const DType dtype : kFloatingDTypes) {
    visit_any_floating(dtype, "adam_step", [&]<class T>() {
      using Element = device_element_t<T>;
      in_lists<AdamTensorList<Element>>(
          params, dtype,
          [&](AdamTensorList<Element>& list, size_t i) {
            const int at = list.count;
            list.params[at] = device_data<T>(params[i]);
            list.grads[at] = device_data<T>(dense_grads[i]);
            list.exp_avg[at] = device_data<T>(exp_avgs[i]);
            list.exp_avg_sq[at] = device_data<T>(exp_avg_sqs[i]);
            list.sizes[at] = params[i].numel();
            list.steps[at] = steps[i].data_ptr<double>();
          },
          [&](const AdamTensorList<Element>& list) { launch_adam_step<Element>(list, hyper); });
    });
  }
}
EMBER_REGISTER_KERNEL(kernels::adam_step, DeviceType::CUDA, adam_step_cuda);

void sgd_step_cuda(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<Tensor> momentum_buffers,
                   const Tensor& lr, const SGDStepOptions& options) {
  std::vector<Tensor> dense_grads;
  std::vector<bool> first_step(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    check_contiguous("sgd_step", params[i], "parameter", i);
    dense_grads.push_back(contiguous(grads[i]));
    if (options.momentum == 0.0) continue;
    if (!momentum_buffers[i].defined()) {
      momentum_buffers[i] = empty_like(params[i]);  // written whole by the kernel's first step
      first_step[i] = true;
    }
    check_contiguous("sgd_step", momentum_buffers[i], "momentum buffer of parameter", i);
  }
  const SGDHyperParameters hyper{lr.data_ptr<double>(), options.momentum, options.dampening, options.weight_decay,
                                 options.nesterov};
  for (const DType dtype : kFloatingDTypes) {
    visit_any_floating(dtype, "sgd_step", [&]<class T>() {
      using Element = device_element_t<T>;
      in_lists<SGDTensorList<Element>>(
          params, dtype,
          [&](SGDTensorList<Element>& list, size_t i) {
            const int at = list.count;
            list.params[at] = device_data<T>(params[i]);
            list.grads[at] = device_data<T>(dense_grads[i]);
            list.momentum_buffers[at] = options.momentum == 0.0 ? nullptr : device_data<T>(momentum_buffers[i]);
            list.sizes[at] = params[i].numel();
            list.first_step[at] = first_step[i];
          },
          [&](const SGDTensorList<Element>& list) { launch_sgd_step<Element>(list, hyper); });
    });
  }
}
EMBER_REGISTER_KERNEL(kernels::sgd_step, DeviceType::CUDA, sgd_step_cuda);

}  // namespace
}  // namespace ember::cuda
