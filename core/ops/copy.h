// Copies: contiguous, clone, dtype and device conversion, and copy_ into an existing tensor.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

// The same values in row-major order; returns `x` itself when already contiguous.
Tensor contiguous(const Tensor& x);
// A contiguous copy with its own storage (differentiable).
Tensor clone(const Tensor& x);
// Converts the values (differentiable between floating dtypes). Returns `x` when already so.
Tensor to_dtype(const Tensor& x, DType dtype);
// Copies to another device (differentiable). Returns `x` when already there.
Tensor to_device(const Tensor& x, Device device);

// Writes `src` (broadcast to dst's shape, same dtype) into `dst` in place.
Tensor& copy_(Tensor& dst, const Tensor& src);

namespace kernels {
// dst[i] = src[i] converted to dst's dtype; src broadcasts to dst's shape; either may be
// strided. Looked up by the device that is not the CPU, if any, so the CUDA backend's entry
// also handles host<->device transfers.
extern KernelTable<void(const Tensor& dst, const Tensor& src)> copy;
}  // namespace kernels

}  // namespace ember
