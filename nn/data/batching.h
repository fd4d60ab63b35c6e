// Batching: padding token sequences into id and mask tensors, and choosing which examples go
// together, by seeded shuffling or by bucketing similar lengths. The shuffles use a fixed
// algorithm on ember's Philox generator, so a seed gives the same batches on every platform.
//
//   auto batches = datasets::shuffled_batches(train.size(), 32, seed);
//   for (const auto& indices : batches) {
//     datasets::PaddedBatch batch = datasets::pad_batch(datasets::take(token_ids, indices), pad_id);
//     Tensor logits = model->forward(batch.ids, batch.padding_mask);
//   }
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace ember::datasets {

struct PaddedBatch {
  Tensor ids;                    // int64 [batch, longest], rows padded with pad_id after the tokens
  Tensor padding_mask;           // bool [batch, longest], true = padding (nn's key_padding_mask)
  std::vector<int64_t> lengths;  // tokens in each row, padding excluded
};

// Pads the sequences to the longest of them, after cutting each to its first max_length
// tokens when max_length >= 1 (-1: no limit), and further up to a multiple of
// length_multiple: batches then come in a few shapes, and a GPU replays one CUDA graph per
// shape (nn/train/graphed_steps.h). The tensors are on the CPU: move them with .to(device).
// Throws ember::Error for an empty batch, an empty sequence (a row of padding only would leave
// attention nothing to attend to), a max_length of 0 or below -1, or a length_multiple below 1.
PaddedBatch pad_batch(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id, int64_t max_length = -1,
                      int64_t length_multiple = 1);

// items[indices[0]], items[indices[1]], ...: the examples of one batch.
template <class T>
std::vector<T> take(const std::vector<T>& items, const std::vector<int64_t>& indices) {
  std::vector<T> picked;
  picked.reserve(indices.size());
  for (const int64_t index : indices) {
    EMBER_CHECK(index >= 0 && index < static_cast<int64_t>(items.size()), "take: index {} out of range for {} items",
                index, items.size());
    picked.push_back(items[static_cast<size_t>(index)]);
  }
  return picked;
}

// 0, 1, ..., count - 1 in a random order fixed by the seed (Fisher-Yates; each swap draws a
// uniform integer by rejection from 64-bit Philox 4x32-10 words, key = seed, counters 0, 1, ...).
std::vector<int64_t> shuffled_indices(int64_t count, uint64_t seed);

// shuffled_indices(count, seed) cut into batches of batch_size; the last batch is smaller
// when batch_size does not divide count, or left out when drop_last is true.
std::vector<std::vector<int64_t>> shuffled_batches(int64_t count, int64_t batch_size, uint64_t seed,
                                                   bool drop_last = false);

// Limits of a bucketed batch: batch_size, max_tokens or both (0 = no limit; not both 0).
struct BucketingOptions {
  int64_t batch_size = 0;       // the most sequences in a batch
  int64_t max_tokens = 0;       // the most padded tokens in a batch: rows × the longest length
  int64_t chunk_batches = 100;  // how many batches' worth of sequences are sorted together
};

// Batches of indices into `lengths` (the length of each example; for a pair of sequences,
// e.g. the longer of the two) whose examples have similar lengths, so padding is small:
//  1. shuffle the indices (as shuffled_indices);
//  2. cut them into chunks of chunk_batches × batch_size indices (with max_tokens only:
//     chunk_batches × max_tokens / mean length);
//  3. sort each chunk by length (stable: equal lengths stay shuffled), and cut it into
//     batches greedily, closing a batch when the next example would break a limit;
//  4. shuffle the order of all the batches.
// Every index appears in exactly one batch. An example longer than max_tokens gets a batch of
// its own. With batch_size only, every epoch has the same number of batches.
std::vector<std::vector<int64_t>> bucketed_batches(const std::vector<int64_t>& lengths,
                                                   const BucketingOptions& options, uint64_t seed);

// The seed of epoch `epoch` under a run's seed (two Philox words of key seed, counter epoch):
// BatchSchedule shuffles epoch e with it, so every epoch differs and each can be recomputed.
uint64_t epoch_seed(uint64_t seed, int64_t epoch);

}  // namespace ember::datasets
