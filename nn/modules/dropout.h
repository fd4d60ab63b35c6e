// Dropout: zeroes each element with probability p in training mode (scaling the survivors by
// 1/(1-p)); the identity in evaluation mode.
#pragma once

#include "nn/modules/unary_module.h"

namespace ember::nn {

class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  double p() const { return p_; }

 private:
  double p_;
};

}  // namespace ember::nn
