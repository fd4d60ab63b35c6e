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

void SGD::update_group(const ParamGroup& group, std::span<ParamState> states) {
  const double lr = group.options.at("lr");
  const double momentum = group.options.at("momentum");
  const double dampening = group.options.at("dampening");
  const bool nesterov = group.options.at("nesterov") != 0.0;
  const double weight_decay = group.options.at("weight_decay");
  for (size_t i = 0; i < group.params.size(); ++i) {
    Tensor param = group.params[i];
    Tensor direction = param.grad();
    if (!direction.defined()) continue;
    if (weight_decay != 0.0) direction = add(direction, mul(param, weight_decay));
    if (momentum != 0.0) {
      auto found = states[i].find("momentum_buffer");
      if (found == states[i].end()) {
        found = states[i].emplace("momentum_buffer", clone(direction)).first;
      } else {
        found->second.mul_(momentum).add_(direction, 1.0 - dampening);
      }
      direction = nesterov ? add(direction, mul(found->second, momentum)) : found->second;
    }
    param.add_(direction, -lr);
  }
}

}  // namespace ember::nn
