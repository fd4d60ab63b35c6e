// Checkpoints: everything a training run needs to go on exactly where it stopped (the model,
// the optimizer's state, the learning-rate schedule, the random generator and the step) in
// one safetensors file. A run resumed from a checkpoint continues bit-identically to one that
// never stopped.
#pragma once

#include <cstdint>
#include <string>

#include "nn/lr_schedule.h"
#include "nn/module.h"
#include "nn/optimizer.h"

namespace ember::nn {

// Writes the checkpoint atomically (a crash mid-write leaves the previous file intact).
// `scheduler` may be null.
void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const Scheduler* scheduler, int64_t step);

// Restores model, optimizer, scheduler and the global random generator from `path`, and
// returns the step saved with them. A checkpoint of another configuration (missing or
// unexpected keys, other shapes, another optimizer) throws ember::Error naming the file and
// the keys or shapes that differ; a corrupt file throws naming the file and the problem.
int64_t load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer, Scheduler* scheduler);

}  // namespace ember::nn
