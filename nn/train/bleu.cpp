// Corpus BLEU: clipped n-gram counts summed over sentences, then one geometric mean.
#include "nn/train/bleu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"

namespace ember::train {
namespace {

using NGramCounts = std::map<std::vector<std::string>, int64_t>;

NGramCounts count_ngrams(const std::vector<std::string>& tokens, size_t n) {
  NGramCounts counts;
  for (size_t i = 0; i + n <= tokens.size(); ++i) {
    ++counts[std::vector<std::string>(tokens.begin() + static_cast<std::ptrdiff_t>(i),
                                      tokens.begin() + static_cast<std::ptrdiff_t>(i + n))];
  }
  return counts;
}

bool is_ascii_punctuation(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

std::string BleuScore::summary() const {
  return fmt::format("BLEU {:.2f}  ({:.1f}/{:.1f}/{:.1f}/{:.1f}, BP {:.3f}, hyp {} / ref {} tokens)", score,
                     precisions[0], precisions[1], precisions[2], precisions[3], brevity_penalty, hypothesis_length,
                     reference_length);
}

BleuScore corpus_bleu(const std::vector<std::vector<std::string>>& hypotheses,
                      const std::vector<std::vector<std::string>>& references) {
  EMBER_CHECK(hypotheses.size() == references.size(), "corpus_bleu: {} hypotheses but {} references",
              hypotheses.size(), references.size());
  BleuScore result;
  for (size_t s = 0; s < hypotheses.size(); ++s) {
    result.hypothesis_length += static_cast<int64_t>(hypotheses[s].size());
    result.reference_length += static_cast<int64_t>(references[s].size());
    for (size_t n = 1; n <= 4; ++n) {
      const NGramCounts reference_counts = count_ngrams(references[s], n);
      for (const auto& [ngram, count] : count_ngrams(hypotheses[s], n)) {
        const auto found = reference_counts.find(ngram);
        result.matches[n - 1] += std::min(count, found == reference_counts.end() ? int64_t{0} : found->second);
        result.totals[n - 1] += count;
      }
    }
  }
  double log_precision_sum = 0;
  bool any_zero = false;
  for (size_t n = 0; n < 4; ++n) {
    const double precision =
        result.totals[n] > 0 ? static_cast<double>(result.matches[n]) / static_cast<double>(result.totals[n]) : 0.0;
    result.precisions[n] = 100 * precision;
    if (precision == 0) {
      any_zero = true;
    } else {
      log_precision_sum += std::log(precision);
    }
  }
  if (result.hypothesis_length > 0) {
    const double ratio = static_cast<double>(result.reference_length) / static_cast<double>(result.hypothesis_length);
    result.brevity_penalty = ratio > 1 ? std::exp(1 - ratio) : 1.0;
  }
  result.score = any_zero ? 0.0 : 100 * result.brevity_penalty * std::exp(log_precision_sum / 4);
  return result;
}

std::vector<std::string> bleu_tokens(std::string_view sentence) {
  std::vector<std::string> tokens;
  std::string word;
  const auto end_word = [&] {
    if (!word.empty()) tokens.push_back(std::move(word));
    word.clear();
  };
  for (size_t i = 0; i < sentence.size(); ++i) {
    const char c = sentence[i];
    if (is_space(c)) {
      end_word();
    } else if (is_ascii_punctuation(c)) {
      const bool inside_number = (c == '.' || c == ',') && i > 0 && i + 1 < sentence.size() &&
                                 is_digit(sentence[i - 1]) && is_digit(sentence[i + 1]);
      if (inside_number) {
        word += c;
      } else {
        end_word();
        tokens.emplace_back(1, c);
      }
    } else {
      word += c;
    }
  }
  end_word();
  return tokens;
}

}  // namespace ember::train
