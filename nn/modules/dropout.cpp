// Dropout: core's dropout, switched by the module's training mode.
#include "nn/modules/dropout.h"

#include "core/ops/dropout.h"

namespace ember::nn {

Dropout::Dropout(double p) : UnaryModule("Dropout"), p_(p) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "Dropout: p must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& x) {
  EMBER_CHECK(x.defined(), "Dropout(p={}): input is undefined", p_);
  return dropout(x, p_, is_training());
}

}  // namespace ember::nn
