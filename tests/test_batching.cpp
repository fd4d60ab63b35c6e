// Batching: padded ids and masks, seeded shuffles that repeat exactly, bucketing that keeps
// every example once with less padding, and the per-epoch schedule a resumed run relies on.
#include <algorithm>
#include <set>

#include "nn/data/batch_schedule.h"
#include "nn/data/batching.h"
#include "helpers.h"

using namespace ember;
using namespace ember::testing;
using namespace ember::datasets;

namespace {

using Batches = std::vector<std::vector<int64_t>>;

// Checks that the batches hold 0, 1, ..., count - 1, each exactly once.
void check_each_index_once(const Batches& batches, int64_t count) {
  std::vector<int64_t> seen;
  for (const auto& batch : batches) seen.insert(seen.end(), batch.begin(), batch.end());
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> expected(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) expected[static_cast<size_t>(i)] = i;
  CHECK(seen == expected);
}

// Padding positions the batches would have: rows × longest length, minus the real tokens.
int64_t padding_of(const Batches& batches, const std::vector<int64_t>& lengths) {
  int64_t padding = 0;
  for (const auto& batch : batches) {
    int64_t longest = 0;
    int64_t tokens = 0;
    for (const int64_t index : batch) {
      longest = std::max(longest, lengths[static_cast<size_t>(index)]);
      tokens += lengths[static_cast<size_t>(index)];
    }
    padding += static_cast<int64_t>(batch.size()) * longest - tokens;
  }
  return padding;
}

// Lengths like a corpus of sentences: mostly short, some long (a fixed pseudo-random pattern).
std::vector<int64_t> sentence_lengths(int64_t count) {
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < count; ++i) lengths.push_back(3 + (i * 7919 % 23) + (i % 11 == 0 ? 40 : 0));
  return lengths;
}

}  // namespace

// --- pad_batch ----------------------------------------------------------------------------------

TEST_CASE("pad_batch pads to the longest sequence and marks the padding true") {
  const PaddedBatch batch = pad_batch({{5, 6, 7}, {8}, {9, 10}}, 0);
  CHECK(batch.ids.sizes() == Shape{3, 3});
  CHECK(batch.ids.dtype() == kInt64);
  CHECK(batch.ids.to_vector<int64_t>() == std::vector<int64_t>{5, 6, 7, 8, 0, 0, 9, 10, 0});
  CHECK(batch.padding_mask.sizes() == Shape{3, 3});
  CHECK(batch.padding_mask.dtype() == kBool);
  CHECK(batch.padding_mask.to_vector<bool>() ==
        std::vector<bool>{false, false, false, false, true, true, false, false, true});
  CHECK(batch.lengths == std::vector<int64_t>{3, 1, 2});
}

TEST_CASE("pad_batch uses any pad id, needs no padding for equal lengths, and truncates to max_length") {
  const PaddedBatch equal = pad_batch({{1, 2}, {3, 4}}, -1);
  CHECK(equal.ids.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(equal.padding_mask.to_vector<bool>() == std::vector<bool>{false, false, false, false});

  const PaddedBatch cut = pad_batch({{1, 2, 3, 4, 5}, {6, 7}, {8, 9, 10}}, 99, 3);
  CHECK(cut.ids.sizes() == Shape{3, 3});
  CHECK(cut.ids.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 6, 7, 99, 8, 9, 10});
  CHECK(cut.lengths == std::vector<int64_t>{3, 2, 3});

  // A max_length above every length changes nothing: the width is still the batch's longest.
  const PaddedBatch loose = pad_batch({{1}, {2, 3}}, 0, 64);
  CHECK(loose.ids.sizes() == Shape{2, 2});
}

TEST_CASE("pad_batch with length_multiple pads the width up to the next multiple, and no further") {
  const PaddedBatch rounded = pad_batch({{1, 2, 3}, {4}}, 0, -1, 4);
  CHECK(rounded.ids.sizes() == Shape{2, 4});
  CHECK(rounded.ids.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 0, 4, 0, 0, 0});
  CHECK(rounded.padding_mask.to_vector<bool>() ==
        std::vector<bool>{false, false, false, true, false, true, true, true});
  CHECK(rounded.lengths == std::vector<int64_t>{3, 1});
  CHECK(pad_batch({{1, 2, 3, 4}}, 0, -1, 4).ids.sizes() == Shape{1, 4});  // already a multiple
  CHECK(pad_batch({{1, 2, 3, 4, 5}}, 0, 3, 8).ids.sizes() == Shape{1, 8});  // cut to 3, then padded to 8
}

TEST_CASE("pad_batch refuses an empty batch, an empty sequence and a bad max_length") {
  CHECK_THROWS_WITH_ALL(pad_batch({}, 0), "pad_batch", "empty batch");
  CHECK_THROWS_WITH_ALL(pad_batch({{1, 2}, {}}, 0), "pad_batch", "sequence 1 of 2 is empty");
  CHECK_THROWS_WITH_ALL(pad_batch({{1, 2}}, 0, 0), "pad_batch", "max_length", "got 0");
  CHECK_THROWS_WITH_ALL(pad_batch({{1, 2}}, 0, -2), "pad_batch", "max_length", "got -2");
  CHECK_THROWS_WITH_ALL(pad_batch({{1, 2}}, 0, -1, 0), "pad_batch", "length_multiple", "got 0");
}

TEST_CASE("a padded batch gives a mean-pooling classifier the same logits as each sequence alone") {
  manual_seed(3);
  nn::TransformerClassifierOptions options;
  options.vocab_size = 12;
  options.max_len = 8;
  options.num_layers = 1;
  options.layer = {.d_model = 8, .num_heads = 2, .d_ff = 16, .dropout = 0.0, .norm_first = true};
  options.pooling = nn::Pooling::Mean;
  nn::TransformerClassifier model(options);
  model.eval();
  const std::vector<std::vector<int64_t>> sequences = {{3, 4, 5, 6}, {7, 8}, {9, 10, 11}};
  const PaddedBatch batch = pad_batch(sequences, 0);
  const Tensor logits = model.forward(batch.ids, batch.padding_mask);
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor alone = model.forward(pad_batch({sequences[i]}, 0).ids);
    check_close(logits.select(0, static_cast<int64_t>(i)).unsqueeze(0), alone, 1e-5, 1e-5);
  }
}

TEST_CASE("take picks items by index and names an index out of range") {
  const std::vector<std::string> items = {"a", "b", "c"};
  CHECK(take(items, {2, 0, 2}) == std::vector<std::string>{"c", "a", "c"});
  CHECK(take(items, {}).empty());
  CHECK_THROWS_WITH_ALL(take(items, {1, 3}), "take: index 3 out of range for 3 items");
  CHECK_THROWS_WITH_ALL(take(items, {-1}), "take: index -1 out of range");
}

// --- shuffling ----------------------------------------------------------------------------------

TEST_CASE("shuffled_indices is a permutation fixed by the seed") {
  const std::vector<int64_t> order = shuffled_indices(1000, 42);
  check_each_index_once({order}, 1000);
  CHECK(order == shuffled_indices(1000, 42));
  CHECK(order != shuffled_indices(1000, 43));
  // Pinned values: the algorithm (Philox words, rejection sampling, Fisher-Yates from the back)
  // is part of the interface, so a seed gives these batches on every platform and release.
  CHECK(shuffled_indices(10, 2024) == std::vector<int64_t>{7, 1, 6, 5, 9, 8, 0, 2, 3, 4});
  CHECK(shuffled_indices(0, 1).empty());
  CHECK(shuffled_indices(1, 1) == std::vector<int64_t>{0});
}

TEST_CASE("shuffled indices are spread evenly: each position takes each index about equally often") {
  // 4 indices, 4000 seeds: every (position, index) cell should be near 1000.
  std::vector<int64_t> counts(16, 0);
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    const std::vector<int64_t> order = shuffled_indices(4, seed);
    for (size_t position = 0; position < 4; ++position) ++counts[position * 4 + static_cast<size_t>(order[position])];
  }
  for (const int64_t count : counts) {
    CHECK(count > 880);
    CHECK(count < 1120);
  }
}

TEST_CASE("shuffled_batches cuts the shuffled indices into batches; drop_last drops the short one") {
  const Batches batches = shuffled_batches(10, 4, 7);
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].size() == 4);
  CHECK(batches[1].size() == 4);
  CHECK(batches[2].size() == 2);
  check_each_index_once(batches, 10);
  const std::vector<int64_t> order = shuffled_indices(10, 7);
  CHECK(batches[0] == std::vector<int64_t>(order.begin(), order.begin() + 4));
  CHECK(batches == shuffled_batches(10, 4, 7));
  CHECK(batches != shuffled_batches(10, 4, 8));

  const Batches dropped = shuffled_batches(10, 4, 7, true);
  REQUIRE(dropped.size() == 2);
  CHECK(dropped[0] == batches[0]);
  CHECK(dropped[1] == batches[1]);
  CHECK(shuffled_batches(12, 4, 7, true).size() == 3);
  CHECK(shuffled_batches(3, 4, 7, true).empty());
  CHECK(shuffled_batches(0, 4, 7).empty());

  CHECK_THROWS_WITH_ALL(shuffled_batches(10, 0, 7), "shuffled_batches: batch_size must be at least 1, got 0");
  CHECK_THROWS_WITH_ALL(shuffled_batches(-1, 4, 7), "shuffled_batches: count must be at least 0, got -1");
}

// --- bucketing ----------------------------------------------------------------------------------

TEST_CASE("bucketed_batches keeps every index once, respects batch_size and pads less than shuffling") {
  const std::vector<int64_t> lengths = sentence_lengths(5000);
  const Batches bucketed = bucketed_batches(lengths, {.batch_size = 32, .chunk_batches = 20}, 11);
  check_each_index_once(bucketed, 5000);
  for (const auto& batch : bucketed) CHECK(batch.size() <= 32);
  // 5000 = 7 chunks of 640 (20 batches each) + 520 (17 batches: 16 of 32 and one of 8).
  CHECK(bucketed.size() == 7 * 20 + 17);
  CHECK(bucketed.size() == shuffled_batches(5000, 32, 11).size());

  const int64_t bucketed_padding = padding_of(bucketed, lengths);
  const int64_t shuffled_padding = padding_of(shuffled_batches(5000, 32, 11), lengths);
  MESSAGE("padding: bucketed " << bucketed_padding << ", shuffled " << shuffled_padding);
  CHECK(bucketed_padding * 10 < shuffled_padding);

  CHECK(bucketed == bucketed_batches(lengths, {.batch_size = 32, .chunk_batches = 20}, 11));
  CHECK(bucketed != bucketed_batches(lengths, {.batch_size = 32, .chunk_batches = 20}, 12));
}

TEST_CASE("bucketed_batches sorts within chunks and shuffles the batch order") {
  // One chunk holds everything: batches are consecutive runs of the sorted lengths.
  const std::vector<int64_t> lengths = {5, 1, 4, 2, 3, 6, 8, 7};
  const Batches batches = bucketed_batches(lengths, {.batch_size = 2, .chunk_batches = 4}, 5);
  std::set<std::vector<int64_t>> batch_lengths;
  for (const auto& batch : batches) {
    std::vector<int64_t> these;
    for (const int64_t index : batch) these.push_back(lengths[static_cast<size_t>(index)]);
    batch_lengths.insert(these);
  }
  CHECK(batch_lengths == std::set<std::vector<int64_t>>{{1, 2}, {3, 4}, {5, 6}, {7, 8}});
  // Over a few seeds the batch order changes: the shortest batch is not always first.
  std::set<int64_t> first_lengths;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    first_lengths.insert(lengths[static_cast<size_t>(bucketed_batches(lengths, {.batch_size = 2}, seed)[0][0])]);
  }
  CHECK(first_lengths.size() > 1);
}

TEST_CASE("bucketed_batches with a token budget: rows × longest stays within max_tokens") {
  const std::vector<int64_t> lengths = sentence_lengths(3000);
  const Batches batches = bucketed_batches(lengths, {.max_tokens = 600}, 3);
  check_each_index_once(batches, 3000);
  for (const auto& batch : batches) {
    int64_t longest = 0;
    for (const int64_t index : batch) longest = std::max(longest, lengths[static_cast<size_t>(index)]);
    CHECK(static_cast<int64_t>(batch.size()) * longest <= 600);
  }
  // Both limits at once.
  for (const auto& batch : bucketed_batches(lengths, {.batch_size = 16, .max_tokens = 600}, 3)) {
    CHECK(batch.size() <= 16);
  }
  // An example longer than the budget gets a batch of its own.
  const Batches lonely = bucketed_batches({2, 50, 3, 2}, {.max_tokens = 10}, 1);
  check_each_index_once(lonely, 4);
  CHECK(std::count(lonely.begin(), lonely.end(), std::vector<int64_t>{1}) == 1);
}

TEST_CASE("bucketed_batches refuses bad options and lengths") {
  CHECK_THROWS_WITH_ALL(bucketed_batches({1, 2}, {}, 1), "bucketed_batches: set batch_size, max_tokens or both");
  CHECK_THROWS_WITH_ALL(bucketed_batches({1, 2}, {.batch_size = -1}, 1), "bucketed_batches", "got -1 and 0");
  CHECK_THROWS_WITH_ALL(bucketed_batches({1, 2}, {.batch_size = 2, .chunk_batches = 0}, 1), "chunk_batches",
                        "got 0");
  CHECK_THROWS_WITH_ALL(bucketed_batches({1, -2}, {.batch_size = 2}, 1), "length -2 of example 1 is negative");
  CHECK(bucketed_batches({}, {.batch_size = 2}, 1).empty());
}

// --- BatchSchedule ------------------------------------------------------------------------------

TEST_CASE("BatchSchedule: epoch e is shuffled with epoch_seed(seed, e); epochs differ") {
  auto schedule = BatchSchedule::shuffled(100, 16, 9);
  CHECK(schedule.epoch(0) == shuffled_batches(100, 16, epoch_seed(9, 0)));
  CHECK(schedule.epoch(3) == shuffled_batches(100, 16, epoch_seed(9, 3)));
  CHECK(schedule.epoch(0) != schedule.epoch(1));
  CHECK(epoch_seed(9, 0) != epoch_seed(10, 0));
  CHECK(schedule.batches_in_epoch(5) == 7);
  check_each_index_once(schedule.epoch(2), 100);
}

TEST_CASE("BatchSchedule: global steps run through the epochs, and a resumed schedule sees the same batches") {
  auto schedule = BatchSchedule::shuffled(100, 16, 9, true);  // 6 batches an epoch
  CHECK(schedule.batches_in_epoch(0) == 6);
  const auto position = schedule.position(13);
  CHECK(position.epoch == 2);
  CHECK(position.batch == 1);
  CHECK(schedule.batch(13) == schedule.epoch(2)[1]);

  std::vector<std::vector<int64_t>> uninterrupted;
  for (int64_t step = 0; step < 20; ++step) uninterrupted.push_back(schedule.batch(step));
  auto resumed = BatchSchedule::shuffled(100, 16, 9, true);
  for (int64_t step = 11; step < 20; ++step) CHECK(resumed.batch(step) == uninterrupted[static_cast<size_t>(step)]);
}

TEST_CASE("BatchSchedule: bucketed epochs, with a token budget whose batch count varies") {
  const std::vector<int64_t> lengths = sentence_lengths(2000);
  auto fixed = BatchSchedule::bucketed(lengths, {.batch_size = 64}, 4);
  CHECK(fixed.epoch(1) == bucketed_batches(lengths, {.batch_size = 64}, epoch_seed(4, 1)));
  CHECK(fixed.batches_in_epoch(0) == 32);
  CHECK(fixed.batches_in_epoch(7) == 32);

  auto budget = BatchSchedule::bucketed(lengths, {.max_tokens = 500}, 4);
  int64_t step = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const Batches batches = budget.epoch(epoch);
    CHECK(budget.batches_in_epoch(epoch) == static_cast<int64_t>(batches.size()));
    check_each_index_once(batches, 2000);
    for (size_t i = 0; i < batches.size(); ++i, ++step) {
      const auto where = budget.position(step);
      CHECK(where.epoch == epoch);
      CHECK(where.batch == static_cast<int64_t>(i));
    }
  }
  auto resumed = BatchSchedule::bucketed(lengths, {.max_tokens = 500}, 4);
  CHECK(resumed.batch(step - 1) == budget.epoch(2).back());
}

TEST_CASE("BatchSchedule refuses what makes no batch") {
  CHECK_THROWS_WITH_ALL(BatchSchedule::shuffled(0, 4, 1), "BatchSchedule::shuffled: 0 examples make no batch of 4");
  CHECK_THROWS_WITH_ALL(BatchSchedule::shuffled(3, 4, 1, true), "3 examples make no batch of 4 (drop_last)");
  CHECK_THROWS_WITH_ALL(BatchSchedule::shuffled(3, 0, 1), "batch_size must be at least 1");
  CHECK_THROWS_WITH_ALL(BatchSchedule::bucketed({}, {.batch_size = 2}, 1), "BatchSchedule::bucketed: no examples");
  CHECK_THROWS_WITH_ALL(BatchSchedule::bucketed({1, 2}, {}, 1), "set batch_size, max_tokens or both");
  auto schedule = BatchSchedule::shuffled(10, 4, 1);
  CHECK_THROWS_WITH_ALL(schedule.batch(-1), "BatchSchedule::position: step must be at least 0, got -1");
  CHECK_THROWS_WITH_ALL(schedule.epoch(-1), "BatchSchedule::epoch: epoch must be at least 0, got -1");
}
