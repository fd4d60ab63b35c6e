// Gradient clipping by the total norm of all gradients, as torch.nn.utils.clip_grad_norm_.
#pragma once

#include <limits>
#include <vector>

#include "core/tensor.h"

namespace ember::nn {

// The norm (norm_type 2, or infinity for the largest magnitude) of all the parameters'
// gradients taken together, as a 0-d float64 tensor on the first gradient's device (0 when no
// parameter has a gradient). When it exceeds max_norm, every gradient is scaled in place by
// max_norm / (total_norm + 1e-6); otherwise they are left as they are. Parameters without a
// gradient (or with an empty one) are skipped.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0);

}  // namespace ember::nn
