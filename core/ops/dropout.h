// Dropout with inverted scaling: in training, each element is zeroed with probability p and
// the survivors scaled by 1/(1-p), so evaluation needs no rescaling. Reproducible under
// manual_seed.
#pragma once

#include "core/tensor.h"

namespace ember {

// Returns x unchanged when !train or p == 0; p must be in [0, 1].
Tensor dropout(const Tensor& x, double p, bool train = true);

}  // namespace ember
