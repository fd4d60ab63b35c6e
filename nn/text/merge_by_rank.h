// Byte-pair encoding's inner loop, shared by BpeTokenizer and Gpt2Tokenizer: a piece's symbols
// merged pair by pair in the order of the merges' ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace ember::text {

// Merges `symbol` (a piece's symbol ids, one per byte to begin with) in place: again and again
// the adjacent pair whose merge has the lowest rank, the leftmost first among equals, until no
// adjacent pair has a merge; then calls emit(id) for each remaining symbol, left to right.
// `merge_of(left, right)` returns a pointer to the merge of that pair (with `rank` and `result`
// members), or nullptr when there is none.
//
// GPT-2's encoder merges every occurrence of the lowest-ranked pair, left to right, then looks
// again. Popping (rank, position) from a heap does the same in O(n log n): a merge's result only
// takes part in merges of higher rank (the loaders check that), so no pair a merge creates can
// outrank the pairs already waiting. The symbols form a linked list over the byte positions; a
// merge keeps the left node, and a candidate whose symbols a merge has since changed is stale.
template <class MergeOf, class Emit>
void merge_by_rank(std::vector<int32_t>& symbol, const MergeOf& merge_of, const Emit& emit) {
  const auto length = static_cast<int32_t>(symbol.size());
  std::vector<int32_t> next(length), previous(length);
  for (int32_t i = 0; i < length; ++i) {
    next[i] = i + 1;  // `length` marks the end
    previous[i] = i - 1;
  }
  struct Candidate {
    int32_t rank;
    int32_t position;
    int32_t left;
    int32_t right;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int32_t position) {
    if (position < 0 || next[position] >= length) return;
    if (const auto* merge = merge_of(symbol[position], symbol[next[position]])) {
      queue.push({merge->rank, position, symbol[position], symbol[next[position]]});
    }
  };
  for (int32_t i = 0; i + 1 < length; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate candidate = queue.top();
    queue.pop();
    const int32_t position = candidate.position;
    const int32_t right = next[position];
    if (symbol[position] != candidate.left || right >= length || symbol[right] != candidate.right) continue;
    symbol[position] = merge_of(candidate.left, candidate.right)->result;
    symbol[right] = -1;
    next[position] = next[right];
    if (next[right] < length) previous[next[right]] = position;
    consider(previous[position]);
    consider(position);
  }
  for (int32_t i = 0; i < length; i = next[i]) emit(symbol[i]);
}

}  // namespace ember::text
