// Byte-pair encoding's inner loop, shared by BpeTokenizer and Gpt2Tokenizer: a piece's symbols
// merged pair by pair in the order of the merges' ranks.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ember::text {

// One learned merge, as the encoders look it up: its rank (its place in the list of merges;
// lower ranks were learned first and are applied first) and the id of the symbol it makes.
struct RankedMerge {
  int32_t rank;
  int32_t result;
};

// The pair (left, right) of symbol ids as one integer, to key a hash map with.
inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Every merge of a tokenizer, by pair_key(left, right).
using MergeTable = std::unordered_map<uint64_t, RankedMerge>;

// Merges `symbols` (a piece's symbol ids, one per byte to begin with) in place: again and again
// the adjacent pair whose merge has the lowest rank, the leftmost first among equals, until no
// adjacent pair has a merge. On return `symbols` holds the piece's final symbols, left to right.
//
// A merge's result may only take part in merges of higher rank (merge_by_rank.cpp says why):
// BpeTokenizer gives each merge's result a new id, so no earlier merge can use it, and
// Gpt2Tokenizer::load checks it.
void merge_by_rank(std::vector<int32_t>& symbols, const MergeTable& merges);

}  // namespace ember::text
