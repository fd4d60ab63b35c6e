// The reference workloads of the side-by-side benchmark, built with ember: the transformer
// classifier, the encoder-decoder and GPT-2 (at a size two cores train), with the sizes torch_workloads.py gives PyTorch's
// versions. A workload owns its model, optimizer and one fixed batch; step() is one training
// step (forward, loss, backward, AdamW) and returns the loss. With --precision bf16 or fp16 the
// forward pass and the loss run under autocast, and fp16 scales the loss (nn::GradScaler), as
// torch_workloads.py does with torch.autocast and torch.amp.GradScaler.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ember.h"

namespace ember::bench {

// The sizes a workload is built with. The defaults are the issue's; the scaling sweep varies
// seq_len and d_model (heads stay 4, d_ff stays 4 * d_model).
struct WorkloadSizes {
  int64_t batch = 32;
  int64_t seq_len = 0;  // 0: the workload's own (128 for the classifier, 64 for the encoder-decoder)
  int64_t d_model = 256;
  int64_t heads = 4;
  int64_t vocab = 0;    // 0: the workload's own (8192, 8000, 50257)
  int64_t layers = 0;   // 0: the workload's own (4, 3 + 3, 4)
};

class Workload {
 public:
  explicit Workload(train::Precision precision)
      : precision_(precision), scaler_({.enabled = train::needs_loss_scaling(precision)}) {}
  virtual ~Workload() = default;
  // One training step, queued: the loss stays on the device (no host wait), so the step can be
  // captured in a CUDA graph.
  virtual Tensor queue_step() = 0;
  // One training step, finished: the loss read back.
  double step() { return queue_step().item<double>(); }
  virtual nn::Module& model() = 0;
  // Tokens one step reads: batch x sequence length (source and target for the encoder-decoder).
  virtual int64_t tokens_per_step() const = 0;

 protected:
  // The step every workload takes: zero the gradients, forward and loss (`loss_of`) under the
  // precision's autocast, backward of the (scaled) loss, the optimizer's step.
  Tensor train_step(nn::Optimizer& optimizer, Device device, const std::function<Tensor()>& loss_of);

 private:
  train::Precision precision_;
  nn::GradScaler scaler_;
};

// "classifier", "encoder-decoder" or "gpt"; anything else throws ember::Error.
std::unique_ptr<Workload> make_workload(const std::string& name, const WorkloadSizes& sizes, Device device,
                                        train::Precision precision = train::Precision::Float32);

}  // namespace ember::bench
