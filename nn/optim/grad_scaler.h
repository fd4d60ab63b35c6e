// Loss scaling for float16 training, as torch.amp.GradScaler.
//
// float16 stops at 65504 and, below 6e-8, at zero: small gradients of a float16 product
// underflow. Multiplying the loss by a large scale before backward lifts every gradient by the
// same factor; dividing the float32 gradients by it before the update undoes it. A scale too
// large makes some gradient overflow to inf: that step is skipped and the scale halved; after
// growth_interval steps without overflow it is doubled again, so it stays near the largest
// value that fits.
//
//   nn::GradScaler scaler({.enabled = precision == kFloat16});
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);                  // before clipping, which reads true gradients
//   nn::clip_grad_norm_(model->parameters(), 1.0);
//   scaler.step(optimizer);                      // skipped if a gradient is inf or NaN
//   scaler.update();
//
// bfloat16 has float32's range and needs no scaling: a disabled scaler passes the loss
// through and step() just steps, so one loop serves every precision.
#pragma once

#include <cstdint>
#include <map>

#include "core/tensor.h"
#include "nn/modules/module.h"
#include "nn/optim/optimizer.h"

namespace ember::nn {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  int64_t growth_interval = 2000;  // steps without inf/NaN before the scale grows
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale, in float32 (a 16-bit loss is converted first: the scale may not fit it).
  // The loss itself when disabled.
  Tensor scale(const Tensor& loss) const;
  // The current scale (1 when disabled).
  double scale() const;
  bool is_enabled() const { return options_.enabled; }

  // Divides the gradients of the optimizer's parameters by the scale, in place, and notes
  // whether any of them holds inf or NaN. Once per optimizer between update()s; call it
  // before anything that reads the gradients' values (clipping), else step() calls it.
  void unscale_(Optimizer& optimizer);
  // Unscales if unscale_ was not called, then steps the optimizer unless a gradient held inf
  // or NaN. Returns whether it stepped. Once per optimizer between update()s.
  bool step(Optimizer& optimizer);
  // Ends the iteration: backs the scale off if any stepped optimizer met inf or NaN, grows it
  // after growth_interval clean steps in a row. Needs a step() since the last update().
  void update();

  // "scale" (0-d float64), "growth_factor", "backoff_factor" (float64), "growth_interval",
  // "growth_tracker" (0-d int64: clean steps since the scale last changed). Empty when disabled.
  StateDict state_dict() const;
  // Restores a state saved by state_dict(); a missing or malformed entry throws, naming it.
  // Nothing to restore when disabled.
  void load_state_dict(const StateDict& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerRecord {
    Stage stage = Stage::Ready;
    bool found_inf = false;
  };

  OptimizerRecord& record_of(const Optimizer& optimizer);

  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  // What each optimizer has been through since the last update(), keyed by address: the
  // optimizers live in the training loop, longer than one iteration.
  std::map<const Optimizer*, OptimizerRecord> records_;
};

}  // namespace ember::nn
