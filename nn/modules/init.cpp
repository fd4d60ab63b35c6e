// Parameter initialisers: random draws written into the tensor under NoGradGuard.
#include "nn/modules/init.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/factory.h"

namespace ember::nn::init {
namespace {

void check_fillable(const Tensor& tensor, const char* name) {
  EMBER_CHECK(tensor.defined(), "init::{}: tensor is undefined", name);
  EMBER_CHECK(is_floating_point(tensor.dtype()), "init::{}: needs a floating point tensor, got {} of shape {}",
              name, tensor.dtype(), shape_str(tensor.sizes()));
}

}  // namespace

Tensor uniform_(Tensor tensor, double low, double high) {
  check_fillable(tensor, "uniform_");
  EMBER_CHECK(low <= high, "init::uniform_: low ({}) must not exceed high ({})", low, high);
  NoGradGuard no_grad;
  // rand draws in the tensor's own dtype and device: float64 tensors get 53 random bits.
  tensor.copy_(add(mul(rand(tensor.sizes(), tensor.options()), high - low), low));
  return tensor;
}

Tensor normal_(Tensor tensor, double mean, double std) {
  check_fillable(tensor, "normal_");
  EMBER_CHECK(std >= 0.0, "init::normal_: std must be non-negative, got {}", std);
  NoGradGuard no_grad;
  tensor.copy_(add(mul(randn(tensor.sizes(), tensor.options()), std), mean));
  return tensor;
}

Tensor zeros_(Tensor tensor) {
  check_fillable(tensor, "zeros_");
  NoGradGuard no_grad;
  tensor.zero_();
  return tensor;
}

Tensor ones_(Tensor tensor) {
  check_fillable(tensor, "ones_");
  NoGradGuard no_grad;
  tensor.fill_(1.0);
  return tensor;
}

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& tensor) {
  EMBER_CHECK(tensor.defined(), "init: tensor is undefined");
  EMBER_CHECK(tensor.dim() >= 2, "init: fan in and fan out need a tensor of at least 2 dims, got shape {}",
              shape_str(tensor.sizes()));
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive_field *= tensor.size(d);
  return {tensor.size(1) * receptive_field, tensor.size(0) * receptive_field};
}

Tensor kaiming_uniform_(Tensor tensor, double a, FanMode mode) {
  check_fillable(tensor, "kaiming_uniform_");
  const auto [fan_in, fan_out] = fan_in_and_fan_out(tensor);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  EMBER_CHECK(fan > 0, "init::kaiming_uniform_: tensor of shape {} has zero fan", shape_str(tensor.sizes()));
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(fan));
  return uniform_(tensor, -bound, bound);
}

Tensor xavier_uniform_(Tensor tensor, double gain) {
  check_fillable(tensor, "xavier_uniform_");
  const auto [fan_in, fan_out] = fan_in_and_fan_out(tensor);
  EMBER_CHECK(fan_in + fan_out > 0, "init::xavier_uniform_: tensor of shape {} has zero fans",
              shape_str(tensor.sizes()));
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(tensor, -bound, bound);
}

}  // namespace ember::nn::init
