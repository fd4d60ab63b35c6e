// merge_by_rank: byte-pair encoding of one piece, the lowest-ranked merge first.
#include "nn/text/merge_by_rank.h"

#include <functional>
#include <queue>

namespace ember::text {

// GPT-2's encoder merges every occurrence of the lowest-ranked pair, left to right, then looks
// again. Popping (rank, position) from a heap does the same in O(n log n): a merge's result only
// takes part in merges of higher rank, so no pair a merge creates can outrank the pairs already
// waiting, and among pairs of one rank the heap gives the leftmost first.
void merge_by_rank(std::vector<int32_t>& symbols, const MergeTable& merges) {
  // The symbols as a linked list over the byte positions: a merge keeps the left node and
  // unlinks the right one, so positions never move and a candidate can name its pair by one.
  const auto length = static_cast<int32_t>(symbols.size());
  std::vector<int32_t> next(length), previous(length);
  for (int32_t i = 0; i < length; ++i) {
    next[i] = i + 1;  // `length` marks the end
    previous[i] = i - 1;
  }
  struct Candidate {
    int32_t rank;
    int32_t position;  // of the pair's left symbol
    int32_t left;
    int32_t right;
    // Ordered for a min-heap: lowest rank first, then leftmost.
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  // Queues the pair starting at `position`, if there is one and it has a merge.
  const auto consider = [&](int32_t position) {
    if (position < 0 || next[position] >= length) return;
    const int32_t left = symbols[position], right = symbols[next[position]];
    const auto found = merges.find(pair_key(left, right));
    if (found != merges.end()) queue.push({found->second.rank, position, left, right});
  };
  for (int32_t i = 0; i + 1 < length; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate candidate = queue.top();
    queue.pop();
    const int32_t position = candidate.position;
    const int32_t right = next[position];
    // Stale: a merge since this candidate was queued changed one of its two symbols (or took the
    // right one away), so the pair it names is no longer there. Candidates are never removed
    // from the heap, only skipped here, which is cheaper than finding them.
    if (symbols[position] != candidate.left || right >= length || symbols[right] != candidate.right) continue;
    symbols[position] = merges.at(pair_key(candidate.left, candidate.right)).result;
    // -1 is no symbol: candidates queued at the unlinked node now fail the check above.
    symbols[right] = -1;
    next[position] = next[right];
    if (next[right] < length) previous[next[right]] = position;
    // The merged symbol forms new pairs with its neighbours on both sides.
    consider(previous[position]);
    consider(position);
  }
  // The survivors, moved to the front in order.
  int32_t kept = 0;
  for (int32_t i = 0; i < length; i = next[i]) symbols[kept++] = symbols[i];
  symbols.resize(kept);
}

}  // namespace ember::text
