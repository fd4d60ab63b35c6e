// Checkpoints: everything a training run needs to go on exactly where it stopped (the model,
// the optimizer's state, the learning-rate schedule, the loss scale of a float16 run, the
// random generator and the step) in one safetensors file. A run resumed from a checkpoint
// continues bit-identically to one that never stopped.
#pragma once

#include <cstdint>
#include <string>

#include "nn/optim/grad_scaler.h"
#include "nn/optim/lr_schedule.h"
#include "nn/modules/module.h"
#include "nn/optim/optimizer.h"

namespace ember::nn {

// Writes the checkpoint atomically (a crash mid-write leaves the previous file intact).
// `scheduler` and `scaler` may be null (a disabled scaler has nothing to save either).
void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const Scheduler* scheduler, int64_t step, const GradScaler* scaler = nullptr);

// Restores model, optimizer, scheduler and the global random generator from `path`, and
// returns the step saved with them. A checkpoint of another configuration (missing or
// unexpected keys, other shapes, another optimizer) throws ember::Error naming the file and
// the keys or shapes that differ; a corrupt file throws naming the file and the problem.
// An enabled `scaler` takes the loss scale saved with the checkpoint, if any: a run may change
// its precision when resumed, so a scaler without saved state starts afresh, and a saved state
// without an enabled scaler is left unused.
int64_t load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer, Scheduler* scheduler,
                        GradScaler* scaler = nullptr);

}  // namespace ember::nn
