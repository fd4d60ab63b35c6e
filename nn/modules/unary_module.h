// UnaryModule: a module whose forward maps one tensor to one tensor. Sequential chains these;
// Linear, Embedding, LayerNorm, Dropout, the activations and FeedForward are all of this kind.
#pragma once

#include <string>

#include "nn/modules/module.h"

namespace ember::nn {

class UnaryModule : public Module {
 public:
  using Module::Module;
  virtual Tensor forward(const Tensor& input) = 0;
  Tensor operator()(const Tensor& input) { return forward(input); }
};

}  // namespace ember::nn
