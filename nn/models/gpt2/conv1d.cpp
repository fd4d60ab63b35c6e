// Conv1D: Linear's product with the weight read transposed.
#include "nn/models/gpt2/conv1d.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/matmul.h"
#include "core/ops/views.h"
#include "nn/modules/init.h"

namespace ember::nn {

Conv1D::Conv1D(int64_t in_features, int64_t out_features, double std) : UnaryModule("Conv1D") {
  EMBER_CHECK(in_features > 0 && out_features > 0, "Conv1D(in_features={}, out_features={}): sizes must be positive",
              in_features, out_features);
  weight = register_parameter("weight", empty({in_features, out_features}));
  bias = register_parameter("bias", zeros({out_features}));
  init::normal_(weight, 0.0, std);
}

std::string Conv1D::describe() const {
  return fmt::format("Conv1D(in_features={}, out_features={})", in_features(), out_features());
}

Tensor Conv1D::forward(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_features(), "{}: expected input [..., {}], got {}",
              describe(), in_features(), x.defined() ? shape_str(x.sizes()) : "undefined");
  // linear computes x W'^T + b for W' [out, in]: W' is W's transposed view, so no copy is made.
  return linear(x, transpose(weight, 0, 1), bias);
}

}  // namespace ember::nn
