// Linear: parameters, initialisation and the checked forward over core's fused linear op.
#include "nn/modules/linear.h"

#include <cmath>

#include "core/ops/factory.h"
#include "core/ops/matmul.h"
#include "nn/modules/init.h"

namespace ember::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : UnaryModule("Linear"), in_features_(in_features), out_features_(out_features) {
  EMBER_CHECK(in_features > 0 && out_features > 0, "{}: in_features and out_features must be positive",
              describe());
  weight = register_parameter("weight", empty({out_features, in_features}));
  if (bias) this->bias = register_parameter("bias", empty({out_features}));
  reset_parameters();
}

std::string Linear::describe() const {
  return fmt::format("Linear(in_features={}, out_features={})", in_features_, out_features_);
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) {
  EMBER_CHECK(x.defined(), "{}: input is undefined", describe());
  EMBER_CHECK(x.dim() >= 1 && x.size(-1) == in_features_, "{}: expected input [..., {}], got {}", describe(),
              in_features_, shape_str(x.sizes()));
  return linear(x, weight, bias);
}

}  // namespace ember::nn
