// SGD's update and hyper-parameter checks.
#include "nn/optim/sgd.h"

#include <cmath>

#include "core/ops/optimizer_steps.h"

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

void SGD::update_group(size_t group_index, const ParamGroup& group, std::span<ParamState> states) {
  const SGDStepOptions options{group.options.at("momentum"), group.options.at("dampening"),
                               group.options.at("weight_decay"), group.options.at("nesterov") != 0.0};
  for (const std::vector<size_t>& on_device : with_grad_by_device(group)) {
    std::vector<Tensor> params, grads, buffers;
    const Device device = group.params[on_device.front()].device();
    for (const size_t i : on_device) {
      params.push_back(group.params[i]);
      grads.push_back(group.params[i].grad());
      auto found = states[i].find("momentum_buffer");
      if (options.momentum != 0.0 && found == states[i].end()) check_can_create_state(group_index, i, "momentum buffer");
      buffers.push_back(found == states[i].end() ? Tensor() : found->second);
    }
    sgd_step(params, grads, buffers, lr_tensor(group_index, device), options);
    if (options.momentum == 0.0) continue;
    for (size_t j = 0; j < on_device.size(); ++j) states[on_device[j]]["momentum_buffer"] = buffers[j];
  }
}

}  // namespace ember::nn
