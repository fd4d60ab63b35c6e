// The batches of every epoch of a run, by epoch or by global step.
#include "nn/data/batch_schedule.h"

#include "core/error.h"

namespace ember::datasets {

BatchSchedule BatchSchedule::shuffled(int64_t count, int64_t batch_size, uint64_t seed, bool drop_last) {
  EMBER_CHECK(batch_size >= 1, "BatchSchedule::shuffled: batch_size must be at least 1, got {}", batch_size);
  EMBER_CHECK(count >= 1 && (!drop_last || count >= batch_size),
              "BatchSchedule::shuffled: {} examples make no batch of {}{}", count, batch_size,
              drop_last ? " (drop_last)" : "");
  BatchSchedule schedule;
  schedule.count_ = count;
  schedule.batch_size_ = batch_size;
  schedule.drop_last_ = drop_last;
  schedule.seed_ = seed;
  return schedule;
}

BatchSchedule BatchSchedule::bucketed(std::vector<int64_t> lengths, BucketingOptions options, uint64_t seed) {
  EMBER_CHECK(!lengths.empty(), "BatchSchedule::bucketed: no examples");
  BatchSchedule schedule;
  schedule.bucketed_ = true;
  schedule.count_ = static_cast<int64_t>(lengths.size());
  schedule.lengths_ = std::move(lengths);
  schedule.options_ = options;
  schedule.seed_ = seed;
  schedule.cached(0);  // checks the options now rather than at the first step
  return schedule;
}

std::vector<std::vector<int64_t>> BatchSchedule::compute(int64_t epoch) const {
  const uint64_t seed = epoch_seed(seed_, epoch);
  if (bucketed_) return bucketed_batches(lengths_, options_, seed);
  return shuffled_batches(count_, batch_size_, seed, drop_last_);
}

std::vector<std::vector<int64_t>> BatchSchedule::epoch(int64_t epoch) {
  EMBER_CHECK(epoch >= 0, "BatchSchedule::epoch: epoch must be at least 0, got {}", epoch);
  return cached(epoch);
}

const std::vector<std::vector<int64_t>>& BatchSchedule::cached(int64_t epoch) {
  if (epoch != cached_epoch_) {
    cached_batches_ = compute(epoch);
    cached_epoch_ = epoch;
  }
  return cached_batches_;
}

int64_t BatchSchedule::batches_in_epoch(int64_t epoch) {
  EMBER_CHECK(epoch >= 0, "BatchSchedule::batches_in_epoch: epoch must be at least 0, got {}", epoch);
  if (!epoch_sizes_vary()) epoch = 0;  // every epoch has as many batches as the first
  while (static_cast<int64_t>(epoch_sizes_.size()) <= epoch) {
    const int64_t next = static_cast<int64_t>(epoch_sizes_.size());
    epoch_sizes_.push_back(next == cached_epoch_ ? static_cast<int64_t>(cached_batches_.size())
                                                 : static_cast<int64_t>(compute(next).size()));
  }
  return epoch_sizes_[static_cast<size_t>(epoch)];
}

BatchSchedule::Position BatchSchedule::position(int64_t step) {
  EMBER_CHECK(step >= 0, "BatchSchedule::position: step must be at least 0, got {}", step);
  if (!epoch_sizes_vary()) return {step / batches_in_epoch(0), step % batches_in_epoch(0)};
  Position position{0, step};
  while (position.batch >= batches_in_epoch(position.epoch)) {
    position.batch -= batches_in_epoch(position.epoch);
    ++position.epoch;
  }
  return position;
}

std::vector<int64_t> BatchSchedule::batch(int64_t step) {
  const Position where = position(step);
  return cached(where.epoch)[static_cast<size_t>(where.batch)];
}

}  // namespace ember::datasets
