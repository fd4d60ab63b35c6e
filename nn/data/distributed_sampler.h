// Each rank's share of a training run's batches under data parallelism. The ranks walk the very
// schedule one process would (the same seeded shuffle, the same global batches, step by step),
// and each takes its own contiguous slice of every global batch:
//
//   // one process, batch 64             // two ranks, 32 each, the same 64 examples per step
//   auto schedule =                      auto sampler = datasets::DistributedSampler(
//     BatchSchedule::shuffled(n, 64, s);   BatchSchedule::shuffled(n, 64, s), rank, 2);
//   schedule.batch(step)                 sampler.batch(step)   // rank 0: first 32, rank 1: last 32
//
// A global batch whose size is not a multiple of the world size (the last, short batch of an
// epoch; a bucketed batch) is padded by repeating its own first indices, so every rank gets a
// slice of the same size: the ranks run the same number of steps, each step's average over ranks
// is an average over equal shares, and drop_last in the schedule drops the short batch instead.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/data/batch_schedule.h"

namespace ember::datasets {

// Rank `rank`'s slice of one global batch split among `world_size` ranks, padded as above.
std::vector<int64_t> shard_batch(const std::vector<int64_t>& global_batch, int rank, int world_size);

class DistributedSampler {
 public:
  DistributedSampler(BatchSchedule global, int rank, int world_size);

  // This rank's indices at global step `step`; every rank has as many steps as the schedule.
  std::vector<int64_t> batch(int64_t step);
  // The whole global batch (for the rank that logs what a step saw).
  std::vector<int64_t> global_batch(int64_t step) { return global_.batch(step); }
  int64_t batches_in_epoch(int64_t epoch) { return global_.batches_in_epoch(epoch); }
  BatchSchedule::Position position(int64_t step) { return global_.position(step); }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  BatchSchedule global_;
  int rank_;
  int world_size_;
};

}  // namespace ember::datasets
