// Activation modules: thin wrappers over core's relu, gelu and softmax.
#include "nn/modules/activation.h"

#include "core/ops/softmax.h"

namespace ember::nn {

Tensor activate(Activation activation, const Tensor& x) {
  return activation == Activation::ReLU ? relu(x) : gelu(x);
}

ReLU::ReLU() : UnaryModule("ReLU") {}

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

GELU::GELU(GeluApproximation approximate) : UnaryModule("GELU"), approximate_(approximate) {}

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }

Softmax::Softmax(int64_t dim) : UnaryModule("Softmax"), dim_(dim) {}

Tensor Softmax::forward(const Tensor& x) {
  EMBER_CHECK(x.defined(), "Softmax(dim={}): input is undefined", dim_);
  EMBER_CHECK(dim_ >= -x.dim() && dim_ < x.dim(), "Softmax(dim={}): dim is out of range for an input of shape {}",
              dim_, shape_str(x.sizes()));
  return softmax(x, dim_);
}

}  // namespace ember::nn
