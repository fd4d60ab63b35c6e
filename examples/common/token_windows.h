// The batches a language model trains and is scored on, shared by the examples that train one
// (char_language_model, gpt2): random windows of the training tokens, drawn so that a resumed
// run sees the batches the uninterrupted run would have, and the held-out tokens cut into
// overlapping windows that score every token once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ember.h"

namespace ember::examples {

// `rows` windows of `window` tokens, each starting at a random offset of `ids`, int64 [rows,
// window] on `device`. The offsets of step s are drawn from Philox at counters that depend on
// (seed, s, rank) only, not from the global generator: the batch of step s is the same whether
// the run went straight there or was resumed at it, whatever evaluation and sampling drew in
// between; and each rank of a data-parallel run (rank r of `ranks`) draws rows of its own.
inline Tensor random_windows(const std::vector<int64_t>& ids, int64_t step, int64_t rows, int64_t window,
                             uint64_t seed, Device device, int64_t rank = 0, int64_t ranks = 1) {
  EMBER_CHECK(static_cast<int64_t>(ids.size()) >= window, "the training text has {} tokens, fewer than a window of {}",
              ids.size(), window);
  const uint64_t starts = ids.size() - window + 1;  // the possible offsets
  // Counters far above those the global generator uses, so the two streams never meet.
  const uint64_t first_counter = (uint64_t{1} << 62) + static_cast<uint64_t>((step * ranks + rank) * rows);
  std::vector<int64_t> batch;
  batch.reserve(rows * window);
  for (int64_t row = 0; row < rows; ++row) {
    const auto words = philox4x32(seed, first_counter + row);
    const uint64_t random = (uint64_t{words[0]} << 32) | words[1];
    const auto offset = static_cast<int64_t>(random % starts);
    batch.insert(batch.end(), ids.begin() + offset, ids.begin() + offset + window);
  }
  return tensor(batch, {rows, window}).to(device);
}

// Held-out text in strided windows. The loss over it is the mean of -ln p(t_j | the tokens
// before it) over every token t_j but the first. The model reads at most `context` tokens, so
// the text is cut into windows of `context` tokens that overlap by half. The first window
// scores all its positions; each later one scores only the tokens the windows before it did
// not, which have at least context / 2 tokens of text before them. So every token is scored
// once, with context / 2 to context tokens of history (the first context / 2 tokens of the
// text excepted), and the figure does not depend on a random draw. Positions already counted
// are masked out by setting their targets to cross_entropy's ignore_index.
struct ValidationWindows {
  Tensor inputs;   // int64 [windows, context]
  Tensor targets;  // int64 [windows, context], kIgnoreIndex where not scored
  int64_t scored = 0;
};

inline ValidationWindows validation_windows(const std::vector<int64_t>& ids, int64_t context) {
  const auto n = static_cast<int64_t>(ids.size());
  EMBER_CHECK(n > context, "the held-out text has {} tokens, fewer than the context of {} + 1", n, context);
  std::vector<int64_t> inputs, targets;
  int64_t windows = 0, scored = 0;
  for (int64_t next = 1; next < n;) {  // next: the first token not scored yet
    // Start context / 2 tokens before it, or earlier at the end of the text, so every window is
    // whole.
    const int64_t start = std::min(std::max<int64_t>(0, next - context / 2), n - 1 - context);
    for (int64_t position = 0; position < context; ++position) {
      const int64_t target = start + position + 1;
      inputs.push_back(ids[start + position]);
      targets.push_back(target >= next ? ids[target] : kIgnoreIndex);
      if (target >= next) ++scored;
    }
    next = start + context + 1;
    ++windows;
  }
  return {tensor(inputs, {windows, context}), tensor(targets, {windows, context}), scored};
}

}  // namespace ember::examples
