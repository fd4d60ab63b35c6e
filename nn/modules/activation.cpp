// Activation modules: thin wrappers over core's relu, gelu and softmax; the Activation choice and
// its names in Hugging Face's configs.
#include "nn/modules/activation.h"

#include "core/error.h"
#include "core/ops/softmax.h"

namespace ember::nn {

Tensor activate(Activation activation, const Tensor& x) {
  switch (activation) {
    case Activation::ReLU:
      return relu(x);
    case Activation::GELU:
      return gelu(x);
    case Activation::GELUTanh:
      return gelu(x, GeluApproximation::Tanh);
  }
  fail("activate: unknown activation {}", static_cast<int>(activation));
}

Activation activation_from_name(const std::string& name, const std::string& key) {
  if (name == "relu") return Activation::ReLU;
  if (name == "gelu") return Activation::GELU;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return Activation::GELUTanh;
  fail("{} '{}' is not one of gelu, gelu_new, gelu_pytorch_tanh, relu", key, name);
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
