// Activation modules (ReLU, GELU, Softmax) and the Activation choice that FeedForward, the
// transformer layers and BERT take.
#pragma once

#include <string>

#include "core/ops/unary.h"
#include "nn/modules/unary_module.h"

namespace ember::nn {

// GELU is the exact erf form; GELUTanh its tanh approximation (torch's approximate='tanh').
enum class Activation { ReLU, GELU, GELUTanh };
// relu(x), the exact gelu(x) or gelu(x, GeluApproximation::Tanh).
Tensor activate(Activation activation, const Tensor& x);

// The activation a Hugging Face config names (its "hidden_act"): "relu", "gelu" (the exact form),
// "gelu_new" or "gelu_pytorch_tanh" (both the tanh form). Any other name throws ember::Error
// naming `key` (the config's key, for the message) and the names it knows.
Activation activation_from_name(const std::string& name, const std::string& key = "activation");

class ReLU : public UnaryModule {
 public:
  ReLU();
  Tensor forward(const Tensor& x) override;
};

class GELU : public UnaryModule {
 public:
  // The exact erf form by default; GeluApproximation::Tanh as torch's approximate='tanh'.
  explicit GELU(GeluApproximation approximate = GeluApproximation::None);
  Tensor forward(const Tensor& x) override;
  GeluApproximation approximate() const { return approximate_; }

 private:
  GeluApproximation approximate_;
};

// Softmax along `dim` (negative counts from the end).
class Softmax : public UnaryModule {
 public:
  explicit Softmax(int64_t dim);
  Tensor forward(const Tensor& x) override;
  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
};

}  // namespace ember::nn
