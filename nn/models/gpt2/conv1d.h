// Conv1D, as GPT-2 names its projections: an affine map like Linear whose weight is stored the
// other way round, [in_features, out_features], so that y = x W + b. GPT-2 was written with it
// (a 1x1 convolution in the original TensorFlow code), and its checkpoints keep that layout;
// holding the weight as the file has it makes state_dict() and the checkpoint agree key for key
// and shape for shape. The product reads W through a transposed view, which BLAS takes as is.
#pragma once

#include "nn/modules/unary_module.h"

namespace ember::nn {

class Conv1D : public UnaryModule {
 public:
  // weight [in_features, out_features] drawn from N(0, std^2), bias [out_features] zero, as
  // GPT-2 initialises its projections.
  Conv1D(int64_t in_features, int64_t out_features, double std = 0.02);
  // x [..., in_features] -> [..., out_features].
  Tensor forward(const Tensor& x) override;

  int64_t in_features() const { return weight.size(0); }
  int64_t out_features() const { return weight.size(1); }

  Tensor weight, bias;

 private:
  std::string describe() const;
};

}  // namespace ember::nn
