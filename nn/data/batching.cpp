// Padding sequences into tensors, seeded shuffling, and bucketing by length.
#include "nn/data/batching.h"

#include <algorithm>
#include <array>
#include <limits>
#include <new>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "core/ops/factory.h"
#include "core/random.h"

namespace ember::datasets {

PaddedBatch pad_batch(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id, int64_t max_length,
                      int64_t length_multiple) {
  EMBER_CHECK(!sequences.empty(), "pad_batch: empty batch (no sequences)");
  EMBER_CHECK(max_length == -1 || max_length >= 1, "pad_batch: max_length must be -1 (no limit) or at least 1, got {}",
              max_length);
  EMBER_CHECK(length_multiple >= 1, "pad_batch: length_multiple must be at least 1, got {}", length_multiple);
  PaddedBatch batch;
  int64_t longest = 0;
  for (size_t row = 0; row < sequences.size(); ++row) {
    EMBER_CHECK(!sequences[row].empty(), "pad_batch: sequence {} of {} is empty", row, sequences.size());
    int64_t length = static_cast<int64_t>(sequences[row].size());
    if (max_length != -1) length = std::min(length, max_length);
    batch.lengths.push_back(length);
    longest = std::max(longest, length);
  }
  if (const int64_t remainder = longest % length_multiple; remainder != 0) {
    EMBER_CHECK(longest <= std::numeric_limits<int64_t>::max() - (length_multiple - remainder),
                "pad_batch: the longest sequence ({} tokens) rounded up to a multiple of length_multiple {} "
                "overflows int64", longest, length_multiple);
    longest += length_multiple - remainder;
  }

  const int64_t rows = static_cast<int64_t>(sequences.size());
  batch.ids = full_int64({rows, longest}, pad_id);
  batch.padding_mask = ones({rows, longest}, kBool);
  int64_t* ids = batch.ids.data_ptr<int64_t>();
  bool* padding = batch.padding_mask.data_ptr<bool>();
  for (int64_t row = 0; row < rows; ++row) {
    const std::vector<int64_t>& sequence = sequences[static_cast<size_t>(row)];
    std::copy_n(sequence.begin(), batch.lengths[static_cast<size_t>(row)], ids + row * longest);
    std::fill_n(padding + row * longest, batch.lengths[static_cast<size_t>(row)], false);
  }
  return batch;
}

namespace {

// Random 64-bit words from Philox 4x32-10: key = seed, counters 0, 1, 2, ..., each counter
// giving four 32-bit words, used in order, two to a 64-bit word (the first the high half).
class RandomStream {
 public:
  explicit RandomStream(uint64_t seed) : seed_(seed) {}

  uint64_t next_u64() {
    const uint64_t high = next_u32();
    return (high << 32) | next_u32();
  }

  // Uniform in [0, bound): words below 2^64 mod bound are redrawn, so that the remaining range
  // is a whole number of copies of [0, bound).
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    while (true) {
      const uint64_t word = next_u64();
      if (word >= threshold) return word % bound;
    }
  }

  // Fisher-Yates, from the back: item i swaps with a uniform j in [0, i].
  template <class T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[below(i)]);
    }
  }

 private:
  uint32_t next_u32() {
    if (used_ == 4) {
      block_ = philox4x32(seed_, counter_++);
      used_ = 0;
    }
    return block_[used_++];
  }

  uint64_t seed_;
  uint64_t counter_ = 0;
  std::array<uint32_t, 4> block_{};
  int used_ = 4;
};

// 0, 1, ..., count - 1. A count no vector can hold is an Error naming `op`, not the standard
// library's length_error or bad_alloc.
std::vector<int64_t> iota_indices(int64_t count, const char* op) {
  std::vector<int64_t> indices;
  try {
    indices.resize(static_cast<size_t>(count));
  } catch (const std::length_error&) {
    fail("{}: {} indices are more than a vector can hold", op, count);
  } catch (const std::bad_alloc&) {
    fail("{}: out of memory allocating {} indices", op, count);
  }
  std::iota(indices.begin(), indices.end(), int64_t{0});
  return indices;
}

}  // namespace

std::vector<int64_t> shuffled_indices(int64_t count, uint64_t seed) {
  EMBER_CHECK(count >= 0, "shuffled_indices: count must be at least 0, got {}", count);
  std::vector<int64_t> indices = iota_indices(count, "shuffled_indices");
  RandomStream random(seed);
  random.shuffle(indices);
  return indices;
}

std::vector<std::vector<int64_t>> shuffled_batches(int64_t count, int64_t batch_size, uint64_t seed, bool drop_last) {
  EMBER_CHECK(count >= 0, "shuffled_batches: count must be at least 0, got {}", count);
  EMBER_CHECK(batch_size >= 1, "shuffled_batches: batch_size must be at least 1, got {}", batch_size);
  std::vector<int64_t> order = iota_indices(count, "shuffled_batches");
  RandomStream(seed).shuffle(order);  // as shuffled_indices(count, seed)
  std::vector<std::vector<int64_t>> batches;
  for (int64_t start = 0; start < count; start += batch_size) {
    const int64_t end = std::min(start + batch_size, count);
    if (drop_last && end - start < batch_size) break;
    batches.emplace_back(order.begin() + start, order.begin() + end);
  }
  return batches;
}

std::vector<std::vector<int64_t>> bucketed_batches(const std::vector<int64_t>& lengths,
                                                   const BucketingOptions& options, uint64_t seed) {
  EMBER_CHECK(options.batch_size >= 0 && options.max_tokens >= 0,
              "bucketed_batches: batch_size and max_tokens must be at least 0, got {} and {}", options.batch_size,
              options.max_tokens);
  EMBER_CHECK(options.batch_size > 0 || options.max_tokens > 0,
              "bucketed_batches: set batch_size, max_tokens or both (both are 0)");
  EMBER_CHECK(options.chunk_batches >= 1, "bucketed_batches: chunk_batches must be at least 1, got {}",
              options.chunk_batches);
  const int64_t count = static_cast<int64_t>(lengths.size());
  int64_t total_length = 0;
  for (int64_t i = 0; i < count; ++i) {
    EMBER_CHECK(lengths[static_cast<size_t>(i)] >= 0, "bucketed_batches: length {} of example {} is negative",
                lengths[static_cast<size_t>(i)], i);
    // Saturating: the sum only sets the chunk size, for which INT64_MAX is as good as more.
    if (__builtin_add_overflow(total_length, lengths[static_cast<size_t>(i)], &total_length)) {
      total_length = std::numeric_limits<int64_t>::max();
    }
  }

  int64_t batch_estimate = options.batch_size;
  if (batch_estimate == 0) {
    const int64_t mean_length = std::max<int64_t>(1, count == 0 ? 1 : total_length / count);
    batch_estimate = std::max<int64_t>(1, options.max_tokens / mean_length);
  }
  // Saturating too: a chunk of more than `count` indices is the whole data set, and a wrapped
  // product (chunk_batches of 2^40) would make a negative chunk size that never advances.
  int64_t chunk_size = 0;
  if (__builtin_mul_overflow(options.chunk_batches, batch_estimate, &chunk_size)) {
    chunk_size = std::numeric_limits<int64_t>::max();
  }
  chunk_size = std::max<int64_t>(1, std::min(chunk_size, count));

  RandomStream random(seed);
  std::vector<int64_t> order = iota_indices(count, "bucketed_batches");
  random.shuffle(order);

  std::vector<std::vector<int64_t>> batches;
  const auto length_of = [&](int64_t index) { return lengths[static_cast<size_t>(index)]; };
  for (int64_t chunk_start = 0; chunk_start < count; chunk_start += chunk_size) {
    const auto first = order.begin() + chunk_start;
    const auto last = order.begin() + chunk_start + std::min(chunk_size, count - chunk_start);
    std::stable_sort(first, last, [&](int64_t a, int64_t b) { return length_of(a) < length_of(b); });
    std::vector<int64_t> batch;
    for (auto it = first; it != last; ++it) {
      // Sorted ascending, so the newcomer is the longest of the batch it joins.
      const int64_t rows = static_cast<int64_t>(batch.size()) + 1;
      const bool too_many = options.batch_size > 0 && rows > options.batch_size;
      // rows * length > max_tokens, without the product that could overflow.
      const bool too_long = options.max_tokens > 0 && length_of(*it) > options.max_tokens / rows;
      if (!batch.empty() && (too_many || too_long)) batches.push_back(std::exchange(batch, {}));
      batch.push_back(*it);
    }
    if (!batch.empty()) batches.push_back(std::move(batch));
  }
  random.shuffle(batches);
  return batches;
}

uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
  EMBER_CHECK(epoch >= 0, "epoch_seed: epoch must be at least 0, got {}", epoch);
  const std::array<uint32_t, 4> words = philox4x32(seed, static_cast<uint64_t>(epoch));
  return (static_cast<uint64_t>(words[0]) << 32) | words[1];
}

}  // namespace ember::datasets
