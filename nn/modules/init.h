// Parameter initialisers, as torch.nn.init: each fills a tensor in place (without recording a
// graph, so a parameter that requires grad can be filled) and returns it. All draw from the
// global generator, so manual_seed makes them repeatable.
#pragma once

#include <utility>

#include "core/tensor.h"

namespace ember::nn::init {

// Fills with values uniform on [low, high).
Tensor uniform_(Tensor tensor, double low = 0.0, double high = 1.0);
// Fills with normal values of the given mean and standard deviation.
Tensor normal_(Tensor tensor, double mean = 0.0, double std = 1.0);
Tensor zeros_(Tensor tensor);
Tensor ones_(Tensor tensor);

// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field, where the
// receptive field is the product of the dims after the first two. Needs at least 2 dims.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& tensor);

enum class FanMode { FanIn, FanOut };

// He initialisation for a leaky ReLU of negative slope `a` (a = 0: ReLU): uniform on
// [-bound, bound] with bound = sqrt(2 / (1 + a^2)) * sqrt(3 / fan). nn::Linear uses
// a = sqrt(5), which gives bound = 1 / sqrt(fan_in), as PyTorch's Linear does.
Tensor kaiming_uniform_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::FanIn);
// Glorot initialisation: uniform on [-bound, bound], bound = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0);

}  // namespace ember::nn::init
