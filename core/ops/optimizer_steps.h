// The fused optimizer steps (Adam/AdamW and SGD) as kernel tables: one call updates a list of
// parameters on one device. nn's optimizers keep the groups, the state and the checks, and call
// these; the CPU kernels register from core/ops/optimizer_steps.cpp, CUDA's from cuda/.
//
// The learning rate and the step counts are tensors on the parameters' device, read by the
// kernel when it runs rather than passed as numbers when it is called. A step recorded in a
// CUDA graph (core/cuda_graph.h) is replayed with the arguments it was recorded with, so this is
// what lets a replayed step follow a learning-rate schedule and count its own steps.
#pragma once

#include <span>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

// The hyper-parameters of one Adam/AdamW step other than the learning rate.
struct AdamStepOptions {
  double beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;  // AdamW
};

// The hyper-parameters of one SGD step other than the learning rate.
struct SGDStepOptions {
  double momentum, dampening, weight_decay;
  bool nesterov;
};

namespace kernels {
// One Adam/AdamW update of every params[i] from grads[i], exp_avg[i] and exp_avg_sq[i] updated
// in place (the formulas are nn/optim/adam.h's). lr is a 0-d float64 tensor and steps[i] a 0-d float64
// tensor holding parameter i's step count before this update, all on the parameters' device:
// the kernel updates with t = steps[i] + 1 and stores t there. Each grad and moment has its
// parameter's shape and dtype.
extern KernelTable<void(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avg,
                        std::span<const Tensor> exp_avg_sq, std::span<const Tensor> steps, const Tensor& lr,
                        const AdamStepOptions& options)>
    adam_step;

// One SGD update of every params[i] from grads[i] (the formulas are nn/optim/sgd.h's), lr a 0-d
// float64 tensor on the parameters' device. With momentum != 0, momentum_buffers[i] is the
// parameter's buffer, updated in place, or undefined on its first step: the kernel then creates
// it (the step's direction) and stores it there.
extern KernelTable<void(std::span<const Tensor> params, std::span<const Tensor> grads,
                        std::span<Tensor> momentum_buffers, const Tensor& lr, const SGDStepOptions& options)>
    sgd_step;
}  // namespace kernels

// The optimizers call these, not the tables: each runs the device's kernel and then marks
// everything it wrote (parameters, moments, step counts, momentum buffers) as written in place,
// so a backward through a graph that saved a parameter before the step refuses it, as PyTorch
// does. The tensors are all on one device; the arguments are the tables'.
void adam_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avg,
               std::span<const Tensor> exp_avg_sq, std::span<const Tensor> steps, const Tensor& lr,
               const AdamStepOptions& options);
void sgd_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<Tensor> momentum_buffers,
              const Tensor& lr, const SGDStepOptions& options);

}  // namespace ember
