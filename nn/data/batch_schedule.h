// The batches of every epoch of a training run, fixed by its seed, so that a run resumed at
// step s sees exactly the batches the uninterrupted run would have seen.
//
//   auto schedule = datasets::BatchSchedule::shuffled(train.size(), 32, seed);
//   for (int64_t step = resumed_step; step < total_steps; ++step) {
//     const std::vector<int64_t> indices = schedule.batch(step);
//     ...
//   }
#pragma once

#include <cstdint>
#include <vector>

#include "nn/data/batching.h"

namespace ember::datasets {

class BatchSchedule {
 public:
  // Epoch e is shuffled_batches(count, batch_size, epoch_seed(seed, e), drop_last).
  static BatchSchedule shuffled(int64_t count, int64_t batch_size, uint64_t seed, bool drop_last = false);
  // Epoch e is bucketed_batches(lengths, options, epoch_seed(seed, e)).
  static BatchSchedule bucketed(std::vector<int64_t> lengths, BucketingOptions options, uint64_t seed);

  // The batches of epoch `epoch` (0-based).
  std::vector<std::vector<int64_t>> epoch(int64_t epoch);
  // How many batches epoch `epoch` has: the same for every epoch, except with a max_tokens
  // limit, where it may vary a little.
  int64_t batches_in_epoch(int64_t epoch);

  struct Position {
    int64_t epoch;  // 0-based
    int64_t batch;  // 0-based, within the epoch
  };
  // Where global step `step` (0-based; the steps of epoch 0 come first, then those of epoch 1...)
  // falls.
  Position position(int64_t step);
  // The indices of the batch at global step `step`.
  std::vector<int64_t> batch(int64_t step);

  // Steps that go forward are cheap: the schedule keeps the batches of the last epoch it
  // computed (so it is not safe to share between threads).

 private:
  BatchSchedule() = default;
  std::vector<std::vector<int64_t>> compute(int64_t epoch) const;
  const std::vector<std::vector<int64_t>>& cached(int64_t epoch);
  // Only a token budget makes the number of batches depend on the shuffle.
  bool epoch_sizes_vary() const { return bucketed_ && options_.max_tokens > 0; }

  bool bucketed_ = false;
  int64_t count_ = 0;
  int64_t batch_size_ = 0;
  bool drop_last_ = false;
  std::vector<int64_t> lengths_;
  BucketingOptions options_;
  uint64_t seed_ = 0;

  int64_t cached_epoch_ = -1;
  std::vector<std::vector<int64_t>> cached_batches_;
  std::vector<int64_t> epoch_sizes_;  // batches in epochs 0, 1, ... as far as they were computed
};

}  // namespace ember::datasets
