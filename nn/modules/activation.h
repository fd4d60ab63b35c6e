// Activation modules (ReLU, GELU, Softmax) and the Activation choice that FeedForward and the
// transformer layers take.
#pragma once

#include "core/ops/unary.h"
#include "nn/modules/unary_module.h"

namespace ember::nn {

enum class Activation { ReLU, GELU };
// relu(x) or the exact gelu(x).
Tensor activate(Activation activation, const Tensor& x);

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
