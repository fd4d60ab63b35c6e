// Levenshtein edit distance between token sequences, and the error rate built on it (phoneme
// error rate, word error rate): total edits over total reference length.
//
//   train::ErrorRate per;
//   for (...) per.add(predicted_phonemes, reference_phonemes);
//   fmt::print("PER {:.1f}%\n", 100 * per.rate());
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace ember::train {

// The fewest insertions, deletions and substitutions (each costing 1) that turn `hypothesis`
// into `reference`. Any token type with ==: strings, ids. O(|hypothesis| * |reference|) time,
// O(|reference|) memory.
template <class Token>
int64_t edit_distance(const std::vector<Token>& hypothesis, const std::vector<Token>& reference) {
  // previous[j]: the distance between the hypothesis prefix so far and reference[0, j).
  std::vector<int64_t> previous(reference.size() + 1), current(reference.size() + 1);
  std::iota(previous.begin(), previous.end(), int64_t{0});
  for (size_t i = 1; i <= hypothesis.size(); ++i) {
    current[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= reference.size(); ++j) {
      const int64_t substitution = previous[j - 1] + (hypothesis[i - 1] == reference[j - 1] ? 0 : 1);
      current[j] = std::min({substitution, previous[j] + 1, current[j - 1] + 1});
    }
    std::swap(previous, current);
  }
  return previous[reference.size()];
}

// Edits and reference tokens summed over a corpus: rate() = edits / reference tokens, the
// usual definition of PER and WER (it can exceed 1 when hypotheses are much too long).
struct ErrorRate {
  int64_t edits = 0;
  int64_t reference_tokens = 0;

  template <class Token>
  void add(const std::vector<Token>& hypothesis, const std::vector<Token>& reference) {
    edits += edit_distance(hypothesis, reference);
    reference_tokens += static_cast<int64_t>(reference.size());
  }
  // 0 when nothing was added.
  double rate() const {
    return reference_tokens > 0 ? static_cast<double>(edits) / static_cast<double>(reference_tokens) : 0.0;
  }
};

}  // namespace ember::train
