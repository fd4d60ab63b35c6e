// Dropout with inverted scaling: in training, each element is zeroed with probability p and
// the survivors scaled by 1/(1-p), so evaluation needs no rescaling. Reproducible under
// manual_seed.
#pragma once

#include "core/dispatch.h"
#include "core/random.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
// out[i] = x[i] / (1 - p) where element i is kept, else 0; the mask from `state` as documented
// in dropout.cpp. The backward applies the same mask to the output's gradient.
extern KernelTable<void(const Tensor& out, const Tensor& x, double p, PhiloxState state)> dropout;
extern KernelTable<void(const Tensor& grad_x, const Tensor& grad_y, double p, PhiloxState state)> dropout_backward;
// The same mask kept as bits for the backward, on the devices that register these (the CPU; see
// dropout.cpp): bit i % 32 of 32-bit word i / 32 of `mask`, an int64 tensor of ceil(numel / 64)
// elements; the backward reads them instead of drawing again.
extern KernelTable<void(const Tensor& out, const Tensor& mask, const Tensor& x, double p, PhiloxState state)>
    dropout_keeping_mask;
extern KernelTable<void(const Tensor& grad_x, const Tensor& grad_y, const Tensor& mask, double p)>
    dropout_backward_from_mask;
}  // namespace kernels

// Returns x unchanged when !train or p == 0; p must be in [0, 1].
Tensor dropout(const Tensor& x, double p, bool train = true);

// Dropout with the mask of a draw already made (0 < p < 1): the fused attention's backward
// replays its forward's draw with it under create_graph. Its backward applies the same mask,
// as an op whose own backward is itself again, so dropout has derivatives of every order.
Tensor dropout_with_state(const Tensor& x, double p, const PhiloxState& state);

}  // namespace ember
