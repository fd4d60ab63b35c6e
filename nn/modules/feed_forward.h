// FeedForward: the position-wise block of a transformer layer,
//   dropout(linear2(activation(linear1(x)))),
// with PyTorch's TransformerEncoderLayer names, so parameters read "linear1.weight",
// "linear2.bias", ...
#pragma once

#include <memory>

#include "nn/modules/activation.h"
#include "nn/modules/dropout.h"
#include "nn/modules/linear.h"

namespace ember::nn {

class FeedForward : public UnaryModule {
 public:
  FeedForward(int64_t d_model, int64_t d_ff, Activation activation = Activation::ReLU, double dropout = 0.1);

  // x [..., d_model] -> [..., d_model].
  Tensor forward(const Tensor& x) override;

  Activation activation() const { return activation_; }

  std::shared_ptr<Linear> linear1;  // d_model -> d_ff
  std::shared_ptr<Linear> linear2;  // d_ff -> d_model
  std::shared_ptr<Dropout> dropout;

 private:
  Activation activation_;
};

}  // namespace ember::nn
