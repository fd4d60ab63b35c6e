// FeedForward: two Linear layers around an activation, then dropout.
#include "nn/modules/feed_forward.h"

namespace ember::nn {

FeedForward::FeedForward(int64_t d_model, int64_t d_ff, Activation activation, double dropout)
    : UnaryModule("FeedForward"), activation_(activation) {
  EMBER_CHECK(d_model > 0 && d_ff > 0, "FeedForward(d_model={}, d_ff={}): sizes must be positive", d_model, d_ff);
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, d_ff));
  linear2 = register_module("linear2", std::make_shared<Linear>(d_ff, d_model));
  this->dropout = register_module("dropout", std::make_shared<Dropout>(dropout));
}

Tensor FeedForward::forward(const Tensor& x) {
  return dropout->forward(linear2->forward(activate(activation_, linear1->forward(x))));
}

}  // namespace ember::nn
