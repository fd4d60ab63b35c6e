// SGD's update and hyper-parameter checks.
#include "nn/sgd.h"

#include <cmath>

#include "core/ops/copy.h"
#include "core/ops/elementwise.h"

namespace ember::nn {
namespace {

HyperParameters sgd_defaults(const SGDOptions& options) {
  return {{"lr", options.lr},
          {"momentum", options.momentum},
          {"dampening", options.dampening},
          {"nesterov", options.nesterov ? 1.0 : 0.0},
          {"weight_decay", options.weight_decay}};
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(std::vector<ParamGroup>{{std::move(params), {}}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults)
    : Optimizer("SGD", std::move(groups), sgd_defaults(defaults), {"momentum_buffer"}) {
  check_hyper_parameters();
}

void SGD::check_option(size_t group, const std::string& name, double value) const {
  if (name == "nesterov") {
    EMBER_CHECK(value == 0.0 || value == 1.0, "SGD: nesterov must be 0 or 1, got {} (parameter group {})", value,
                group);
  } else if (name == "dampening") {
    EMBER_CHECK(std::isfinite(value), "SGD: dampening must be finite, got {} (parameter group {})", value, group);
  } else {
    EMBER_CHECK(value >= 0.0 && std::isfinite(value), "SGD: {} must be >= 0, got {} (parameter group {})", name,
                value, group);
  }
}

void SGD::check_group(size_t index) const {
  const HyperParameters& options = group(index).options;
  EMBER_CHECK(options.at("nesterov") == 0.0 || (options.at("momentum") > 0.0 && options.at("dampening") == 0.0),
              "SGD: nesterov momentum needs momentum > 0 and dampening 0, got momentum {} and dampening {} "
              "(parameter group {})", options.at("momentum"), options.at("dampening"), index);
}

namespace kernels {
constinit KernelTable<void(std::span<const Tensor> params, std::span<const Tensor> grads,
                           std::span<Tensor> momentum_buffers, const SGDStepOptions& options)>
    sgd_step{"sgd_step"};
}  // namespace kernels

namespace {

// The CPU step: ember's ops, one parameter after another.
void sgd_step_cpu(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<Tensor> momentum_buffers,
                  const SGDStepOptions& options) {
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor param = params[i];
    Tensor direction = grads[i];
    if (options.weight_decay != 0.0) direction = add(direction, mul(param, options.weight_decay));
    if (options.momentum != 0.0) {
      Tensor& buffer = momentum_buffers[i];
      if (!buffer.defined()) {
        buffer = clone(direction);
      } else {
        buffer.mul_(options.momentum).add_(direction, 1.0 - options.dampening);
      }
      direction = options.nesterov ? add(direction, mul(buffer, options.momentum)) : buffer;
    }
    param.add_(direction, -options.lr);
  }
}
EMBER_REGISTER_KERNEL(kernels::sgd_step, DeviceType::CPU, sgd_step_cpu);

}  // namespace

void SGD::update_group(const ParamGroup& group, std::span<ParamState> states) {
  const SGDStepOptions options{group.options.at("lr"), group.options.at("momentum"), group.options.at("dampening"),
                               group.options.at("weight_decay"), group.options.at("nesterov") != 0.0};
  for (const std::vector<size_t>& on_device : with_grad_by_device(group)) {
    std::vector<Tensor> params, grads, buffers;
    for (const size_t i : on_device) {
      params.push_back(group.params[i]);
      grads.push_back(group.params[i].grad());
      auto found = states[i].find("momentum_buffer");
      buffers.push_back(found == states[i].end() ? Tensor() : found->second);
    }
    kernels::sgd_step[params.front().device()](params, grads, buffers, options);
    if (options.momentum == 0.0) continue;
    for (size_t j = 0; j < on_device.size(); ++j) states[on_device[j]]["momentum_buffer"] = buffers[j];
  }
}

}  // namespace ember::nn
