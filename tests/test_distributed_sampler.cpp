// The distributed sampler's shards, and the bucket plan of data-parallel training: the parts of
// distributed training that need no second process.
#include <algorithm>
#include <set>

#include "helpers.h"
#include "nn/data/distributed_sampler.h"
#include "nn/parallel/gradient_buckets.h"

using namespace ember;

TEST_CASE("the ranks' shards of each step are disjoint, and together they are one process's batch") {
  const int world = 3;
  const int64_t count = 50, per_rank = 4;
  datasets::BatchSchedule one_process = datasets::BatchSchedule::shuffled(count, per_rank * world, 7);
  std::vector<datasets::DistributedSampler> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back(datasets::BatchSchedule::shuffled(count, per_rank * world, 7), r, world);
  }
  const int64_t steps = one_process.batches_in_epoch(0) * 2;  // two epochs
  CHECK(one_process.batches_in_epoch(0) == 5);               // 4 full batches of 12 and one of 2
  for (int64_t step = 0; step < steps; ++step) {
    const std::vector<int64_t> expected = one_process.batch(step);
    std::vector<int64_t> joined;
    for (auto& sampler : ranks) {
      const std::vector<int64_t> shard = sampler.batch(step);
      CHECK(shard.size() == ranks[0].batch(step).size());  // every rank gets as many
      joined.insert(joined.end(), shard.begin(), shard.end());
    }
    if (expected.size() % world == 0) {
      CHECK(joined == expected);  // the same order as one process, split
    } else {
      // The short last batch is padded with its own first indices.
      CHECK(std::vector<int64_t>(joined.begin(), joined.begin() + static_cast<int64_t>(expected.size())) == expected);
      CHECK(std::set<int64_t>(joined.begin(), joined.end()) == std::set<int64_t>(expected.begin(), expected.end()));
    }
  }
}

TEST_CASE("shard_batch pads a batch smaller than the world and splits an even one exactly") {
  CHECK(datasets::shard_batch({5, 6, 7, 8}, 0, 2) == std::vector<int64_t>{5, 6});
  CHECK(datasets::shard_batch({5, 6, 7, 8}, 1, 2) == std::vector<int64_t>{7, 8});
  CHECK(datasets::shard_batch({5, 6, 7}, 1, 2) == std::vector<int64_t>{7, 5});
  CHECK(datasets::shard_batch({9}, 2, 4) == std::vector<int64_t>{9});
}

TEST_CASE("a dropped last batch leaves every rank the same number of full steps") {
  datasets::DistributedSampler sampler(datasets::BatchSchedule::shuffled(50, 12, 3, /*drop_last=*/true), 1, 3);
  CHECK(sampler.batches_in_epoch(0) == 4);
  for (int64_t step = 0; step < 8; ++step) CHECK(sampler.batch(step).size() == 4);
}

TEST_CASE("the sampler and shard_batch refuse a rank outside the world") {
  CHECK_THROWS_WITH_AS(datasets::shard_batch({1, 2}, 2, 2), "shard_batch: rank must be in [0, 2), got 2", Error);
  CHECK_THROWS_WITH_AS(datasets::shard_batch({}, 0, 2), "shard_batch: the global batch is empty", Error);
  CHECK_THROWS_WITH_AS(datasets::DistributedSampler(datasets::BatchSchedule::shuffled(10, 2, 1), 0, 0),
                       "DistributedSampler: world_size must be at least 1, got 0", Error);
}

TEST_CASE("gradient buckets follow the backward order, keep to the cap and never mix dtypes") {
  // Registration order a (10 floats = 40 bytes), b (5 = 20), c (20 = 80), d (2 doubles = 16).
  std::vector<Tensor> parameters = {zeros({10}), zeros({5}), zeros({4, 5}), zeros({2}, kFloat64)};
  const auto buckets = nn::plan_gradient_buckets(parameters, 64);
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].parameters == std::vector<size_t>{3});  // d alone: its dtype differs
  CHECK(buckets[0].dtype == kFloat64);
  CHECK(buckets[1].parameters == std::vector<size_t>{2});  // c: 80 bytes, over the cap, alone
  CHECK(buckets[2].parameters == std::vector<size_t>{1, 0});
  CHECK(buckets[2].offsets == std::vector<int64_t>{0, 5});
  CHECK(buckets[2].numel == 15);
  CHECK(nn::plan_gradient_buckets(parameters, 1 << 20).size() == 2);  // only the dtype splits
  CHECK(nn::plan_gradient_buckets(parameters, 1).size() == 4);        // one parameter each
  CHECK_THROWS_WITH_AS(nn::plan_gradient_buckets(parameters, 0),
                       "plan_gradient_buckets: the bucket cap must be at least 1 byte, got 0", Error);
}

TEST_CASE("gradient buckets can follow a measured order, which must list every parameter once") {
  std::vector<Tensor> parameters = {zeros({10}), zeros({5}), zeros({4, 5})};
  const auto buckets = nn::plan_gradient_buckets(parameters, 64, {0, 1, 2});
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0].parameters == std::vector<size_t>{0, 1});
  CHECK(buckets[1].parameters == std::vector<size_t>{2});
  CHECK_THROWS_WITH_AS(nn::plan_gradient_buckets(parameters, 64, {0, 0, 2}),
                       "plan_gradient_buckets: the order must list each of the 3 parameters once; 0 is repeated", Error);
  CHECK_THROWS_WITH_AS(nn::plan_gradient_buckets(parameters, 64, {0, 7, 2}),
                       "plan_gradient_buckets: the order must list each of the 3 parameters once; 7 is out of range",
                       Error);
  CHECK_THROWS_WITH_AS(nn::plan_gradient_buckets(parameters, 64, {2, 0}),
                       "plan_gradient_buckets: the order lists 2 of the 3 parameters", Error);
}
