// Corpus BLEU-4 (Papineni et al., 2002), the score translation results are reported in, with
// one reference per sentence.
//
//   std::vector<std::vector<std::string>> hypotheses, references;   // tokens per sentence
//   for (...) { hypotheses.push_back(train::bleu_tokens(output)); references.push_back(train::bleu_tokens(target)); }
//   const train::BleuScore bleu = train::corpus_bleu(hypotheses, references);
//   fmt::print("{}\n", bleu.summary());   // BLEU 23.41  (58.2/30.1/17.5/10.3, BP 0.981, hyp 4021 / ref 4098 tokens)
//
// For each n = 1..4 the n-gram matches are counted over the whole corpus, each hypothesis
// n-gram matching at most as often as it occurs in its reference ("clipping"); the precision
// p_n is matches / hypothesis n-grams. The score is the geometric mean of p_1..p_4 times the
// brevity penalty BP = min(1, exp(1 - r / c)) from the total reference length r and total
// hypothesis length c, on a 0-100 scale. No smoothing: if any p_n is 0 the score is 0.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::train {

struct BleuScore {
  double score = 0;                       // 0-100
  std::array<double, 4> precisions{};     // p_1..p_4 as percentages (0-100)
  std::array<int64_t, 4> matches{};       // clipped n-gram matches, n = 1..4
  std::array<int64_t, 4> totals{};        // hypothesis n-grams, n = 1..4
  double brevity_penalty = 0;             // 0-1
  int64_t hypothesis_length = 0, reference_length = 0;  // tokens, summed over the corpus

  // "BLEU 23.41  (58.2/30.1/17.5/10.3, BP 0.981, hyp 4021 / ref 4098 tokens)".
  std::string summary() const;
};

// BLEU-4 of tokenised hypotheses against their references (hypotheses[i] translates the
// sentence whose reference is references[i]). Different counts throw ember::Error. An empty
// corpus, or one whose hypotheses are all empty, scores 0.
BleuScore corpus_bleu(const std::vector<std::vector<std::string>>& hypotheses,
                      const std::vector<std::vector<std::string>>& references);

// A sentence split for scoring: on white space, with each punctuation character its own token
// ("Hello, world!" -> Hello , world !) except a '.' or ',' between digits ("3.5", "1,000").
// Case is kept (BLEU is case-sensitive); characters beyond ASCII stay inside their word.
std::vector<std::string> bleu_tokens(std::string_view sentence);

}  // namespace ember::train
