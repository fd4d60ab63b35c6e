// Data-parallel training: every rank holds the same model, runs its own share of the batch, and
// the gradients are averaged over ranks during backward(), so every rank's optimizer takes the
// same step.
//
//   distributed::init();
//   auto model = std::make_shared<nn::TransformerClassifier>(config);
//   nn::DistributedDataParallel ddp(model);      // rank 0's weights, everywhere
//   for (...) {
//     Tensor loss = cross_entropy(model->forward(batch), labels);   // this rank's batch
//     loss.backward();                          // gradients are averaged as they are made
//     optimizer.step();
//   }
//
// Gradients go into buckets of about bucket_cap_bytes (nn/parallel/gradient_buckets.h). A bucket is
// all-reduced as soon as each of its parameters' gradients is complete, while the backward pass
// goes on with earlier layers; buckets start in one fixed order on every rank, and the end of the
// pass waits for them all and writes the averages into each parameter's .grad. A parameter that
// gets no gradient on a rank in a step (a branch not taken) counts as zero there, so the ranks
// never wait for each other in vain; one that no rank used gets a zero gradient. After the first
// synchronised step the buckets are planned again in the order rank 0's gradients actually came
// (parameters it left without gradient last), as PyTorch does, so that a bucket holding an unused
// parameter does not hold back the ones after it.
//
// Every backward() outside no_sync() averages what .grad holds by then. For gradient accumulation,
// run the first micro-batches' backward inside a no_sync() scope and the last one outside it: one
// all-reduce per step instead of one per micro-batch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/autograd/hooks.h"
#include "core/distributed/process_group.h"
#include "nn/parallel/gradient_buckets.h"
#include "nn/modules/module.h"

namespace ember::nn {

struct DistributedDataParallelOptions {
  int64_t bucket_cap_bytes = 25 << 20;  // PyTorch's default: 25 MiB
  // False starts every bucket only at the end of backward (to measure what overlap gains).
  bool overlap = true;
};

class DistributedDataParallel {
 public:
  // Broadcasts rank 0's parameters and buffers to every rank and hooks the parameters that
  // require grad. Needs distributed::init().
  explicit DistributedDataParallel(std::shared_ptr<Module> module, DistributedDataParallelOptions options = {});
  // The same for a module held elsewhere (a model that is a local variable), which must outlive
  // this object.
  explicit DistributedDataParallel(Module& module, DistributedDataParallelOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Module& module() { return module_; }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }

  // While the returned guard lives, backward() only accumulates gradients locally.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.sync_enabled_) { ddp.sync_enabled_ = false; }
    ~NoSync() { ddp_.sync_enabled_ = previous_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  // What the synchronised steps so far cost.
  struct Stats {
    int64_t steps = 0;             // backward passes whose gradients were averaged
    int64_t bytes_reduced = 0;     // gradient bytes each rank handed to all-reduce
    int64_t buckets_overlapped = 0;  // buckets started by a gradient's hook, before backward ended
    double launch_seconds = 0;     // copying gradients into buckets and starting their all-reduce
    double exposed_seconds = 0;    // waiting for all-reduces at the end of backward (not overlapped)
  };
  const Stats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  void on_gradient_ready(size_t parameter);
  void launch(size_t bucket);
  void launch_ready_buckets();
  void finish_step();
  void plan_buckets(const std::vector<size_t>& order);
  void replan_from_arrival_order();

  std::shared_ptr<Module> owner_;  // null when the module is held elsewhere
  Module& module_;
  DistributedDataParallelOptions options_;
  std::vector<Tensor> parameters_;  // those that require grad, each once, in registration order
  std::vector<GradientBucket> buckets_;
  std::vector<Tensor> flat_;                  // one buffer per bucket
  std::vector<size_t> bucket_of_;             // parameter -> bucket
  std::vector<autograd::HookId> hooks_;

  // The step in progress.
  bool sync_enabled_ = true;
  bool step_running_ = false;
  std::vector<int64_t> pending_in_bucket_;    // gradients each bucket still waits for
  std::vector<bool> ready_;                   // per parameter, this step
  size_t next_to_launch_ = 0;
  bool replanned_ = false;
  std::vector<size_t> arrival_;               // the order gradients came in, until replanned
  std::vector<distributed::Work> work_;       // per bucket, once launched
  Stats stats_;
};

}  // namespace ember::nn
