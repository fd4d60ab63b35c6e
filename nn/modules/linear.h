// Linear: y = x W^T + b, with PyTorch's parameter names and default initialisation.
#pragma once

#include "nn/modules/unary_module.h"

namespace ember::nn {

class Linear : public UnaryModule {
 public:
  // weight [out_features, in_features]: kaiming_uniform_ with a = sqrt(5), i.e. uniform on
  // +-1/sqrt(in_features); bias [out_features] (when `bias`): uniform on the same bound.
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  // x [..., in_features] -> [..., out_features].
  Tensor forward(const Tensor& x) override;
  // Draws fresh initial values (as the constructor does).
  void reset_parameters();

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Tensor weight;
  Tensor bias;  // undefined without bias

 private:
  std::string describe() const;
  int64_t in_features_, out_features_;
};

}  // namespace ember::nn
