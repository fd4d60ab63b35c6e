// In-place ops. Each bumps the storage's version counter, so autograd can tell when a tensor it
// saved for backward was changed. On a leaf that requires grad they throw unless grad mode
// is off (as in optimizer updates under NoGradGuard).
#pragma once

#include <span>

#include "core/tensor.h"

namespace ember {

// The one place an in-place write is recorded: every op and kernel that writes into tensors it
// was given (the ops below, copy_, the fused optimizer steps, the gradients' unscale) calls it
// once the write is queued. It bumps each tensor's version counter, so that a backward that
// saved one of them before the write refuses it instead of using the new values.
void mark_written_in_place(std::span<const Tensor> written);
void mark_written_in_place(const Tensor& written);

Tensor& add_(Tensor& x, const Tensor& other, double alpha = 1.0);  // x += alpha * other
Tensor& add_(Tensor& x, double other);
Tensor& mul_(Tensor& x, const Tensor& other);
Tensor& mul_(Tensor& x, double other);
Tensor& zero_(Tensor& x);
Tensor& fill_(Tensor& x, double value);

}  // namespace ember
