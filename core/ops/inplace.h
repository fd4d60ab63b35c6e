// In-place ops. Each bumps the storage's version counter, so autograd can tell when a tensor it
// saved for backward was changed. On a leaf that requires grad they throw unless grad mode
// is off (as in optimizer updates under NoGradGuard).
#pragma once

#include "core/tensor.h"

namespace ember {

Tensor& add_(Tensor& x, const Tensor& other, double alpha = 1.0);  // x += alpha * other
Tensor& add_(Tensor& x, double other);
Tensor& mul_(Tensor& x, const Tensor& other);
Tensor& mul_(Tensor& x, double other);
Tensor& zero_(Tensor& x);
Tensor& fill_(Tensor& x, double value);

}  // namespace ember
