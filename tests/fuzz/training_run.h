// The small training run whose checkpoints the checkpoint fuzz target loads and the seed writer
// saves: both must agree on the model, the optimizer and the schedule for a seed to load.
#pragma once

#include <memory>

#include "ember.h"

namespace ember::fuzzing {

struct TrainingRun {
  std::shared_ptr<nn::Sequential> model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::LayerNorm>(4), std::make_shared<nn::Linear>(4, 2));
  nn::AdamW optimizer{model->parameters(), {.lr = 1e-2}};
  nn::Scheduler scheduler{optimizer, std::make_shared<nn::WarmupCosine>(1e-2, 2, 10)};

  // One step on a random batch: gives the optimizer its moment buffers and moves the schedule.
  void step() {
    optimizer.zero_grad();
    nn::mse_loss(model->forward(randn({5, 3})), randn({5, 2})).backward();
    optimizer.step();
    scheduler.step();
  }
};

}  // namespace ember::fuzzing
