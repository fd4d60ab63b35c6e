// LayerNorm over the trailing `normalized_shape` dims, with an optional elementwise affine
// (weight initialised to ones, bias to zeros), as torch.nn.LayerNorm.
#pragma once

#include "nn/modules/unary_module.h"

namespace ember::nn {

class LayerNorm : public UnaryModule {
 public:
  LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  // The common case: normalise over the last dim of size `normalized_size`.
  explicit LayerNorm(int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true);

  // x [..., *normalized_shape] -> the same shape.
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  const Shape& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }

  Tensor weight;  // undefined without elementwise_affine
  Tensor bias;

 private:
  std::string describe() const;
  Shape normalized_shape_;
  double eps_;
};

}  // namespace ember::nn
