// Each rank's share of the global batches (nn/data/distributed_sampler.h).
#include "nn/data/distributed_sampler.h"

#include "core/error.h"

namespace ember::datasets {
namespace {

void check_rank(std::string_view op, int rank, int world_size) {
  EMBER_CHECK(world_size >= 1, "{}: world_size must be at least 1, got {}", op, world_size);
  EMBER_CHECK(rank >= 0 && rank < world_size, "{}: rank must be in [0, {}), got {}", op, world_size, rank);
}

}  // namespace

std::vector<int64_t> shard_batch(const std::vector<int64_t>& global_batch, int rank, int world_size) {
  check_rank("shard_batch", rank, world_size);
  EMBER_CHECK(!global_batch.empty(), "shard_batch: the global batch is empty");
  const size_t n = global_batch.size();
  const size_t per_rank = (n + static_cast<size_t>(world_size) - 1) / static_cast<size_t>(world_size);
  std::vector<int64_t> shard;
  shard.reserve(per_rank);
  for (size_t k = 0; k < per_rank; ++k) {
    const size_t position = static_cast<size_t>(rank) * per_rank + k;
    shard.push_back(global_batch[position % n]);  // past the end: the batch's first indices again
  }
  return shard;
}

DistributedSampler::DistributedSampler(BatchSchedule global, int rank, int world_size)
    : global_(std::move(global)), rank_(rank), world_size_(world_size) {
  check_rank("DistributedSampler", rank, world_size);
}

std::vector<int64_t> DistributedSampler::batch(int64_t step) {
  return shard_batch(global_.batch(step), rank_, world_size_);
}

}  // namespace ember::datasets
