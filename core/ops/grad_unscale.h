// GradScaler's unscale and inf/NaN check as one kernel table: one call multiplies a list of
// gradients on one device by 1 / scale in place and notes, in a flag on that device, whether
// any result is inf or NaN, each element read and written once. nn::GradScaler keeps the scale
// and the bookkeeping, and calls this; the CPU kernel registers from core/ops/grad_unscale.cpp,
// CUDA's from cuda/.
//
// Composed of ops the same check takes five passes and three temporaries per gradient
// (multiply, isfinite, logical_not, any, logical_or), and on a GPU as many launches.
#pragma once

#include <span>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember::kernels {

// grads[i] *= inverse_scale for every gradient (floating point, all on found_inf's device), each
// stored value rounded once to its dtype; found_inf (a 0-d float32 tensor) is set to 1 if any
// stored value is inf or NaN, and left as it was otherwise.
extern KernelTable<void(std::span<const Tensor> grads, double inverse_scale, const Tensor& found_inf)>
    unscale_grads;

}  // namespace ember::kernels

namespace ember {

// kernels::unscale_grads on found_inf's device, then every gradient marked as written in place
// (core/ops/inplace.h): a graph that saved one of them (under create_graph) refuses it after.
void unscale_grads(std::span<const Tensor> grads, double inverse_scale, const Tensor& found_inf);

}  // namespace ember
