// LayerNorm: parameters and the checked forward over core's fused layer_norm.
#include "nn/modules/layer_norm.h"

#include <algorithm>

#include "core/ops/factory.h"
#include "core/ops/layer_norm.h"
#include "nn/modules/init.h"

namespace ember::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : UnaryModule("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  EMBER_CHECK(!normalized_shape_.empty() &&
                  std::all_of(normalized_shape_.begin(), normalized_shape_.end(), [](int64_t n) { return n > 0; }),
              "{}: normalized_shape must be non-empty with positive sizes", describe());
  EMBER_CHECK(eps > 0.0, "{}: eps must be positive, got {}", describe(), eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", empty(normalized_shape_));
    bias = register_parameter("bias", empty(normalized_shape_));
  }
  reset_parameters();
}

LayerNorm::LayerNorm(int64_t normalized_size, double eps, bool elementwise_affine)
    : LayerNorm(Shape{normalized_size}, eps, elementwise_affine) {}

std::string LayerNorm::describe() const {
  return fmt::format("LayerNorm(normalized_shape={})", shape_str(normalized_shape_));
}

void LayerNorm::reset_parameters() {
  if (!weight.defined()) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) {
  EMBER_CHECK(x.defined(), "{}: input is undefined", describe());
  const int64_t rank = static_cast<int64_t>(normalized_shape_.size());
  const bool fits = x.dim() >= rank && std::equal(normalized_shape_.begin(), normalized_shape_.end(),
                                                  x.sizes().end() - rank);
  EMBER_CHECK(fits, "{}: expected input [..., {}], got {}", describe(),
              fmt::join(normalized_shape_, ", "), shape_str(x.sizes()));
  return layer_norm(x, normalized_shape_, weight, bias, eps_);
}

}  // namespace ember::nn
