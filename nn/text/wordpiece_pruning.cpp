// prune_wordpiece_vocabulary: count the corpus's pieces and characters under the full
// vocabulary, keep the characters and the most used pieces.
#include "nn/text/wordpiece_pruning.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "nn/text/unicode.h"

namespace ember::text {

WordPieceTokenizer prune_wordpiece_vocabulary(const WordPieceTokenizer& full, const std::vector<std::string>& corpus,
                                              int64_t size) {
  EMBER_CHECK(size > 0, "prune_wordpiece_vocabulary: the size must be positive, not {}", size);
  const Vocabulary& vocabulary = full.vocabulary();
  const int64_t full_size = full.vocab_size();
  std::vector<bool> kept(static_cast<size_t>(full_size), false);
  const auto keep_if_present = [&](const std::string& token) {
    if (vocabulary.contains(token)) kept[static_cast<size_t>(vocabulary.id(token))] = true;
  };
  for (const std::string& special : full.special_tokens().names()) keep_if_present(special);

  // The characters: with "c" and "##c" for each one a word starts or goes on with, greedy
  // longest-match can always fall back to single characters, so no word the full vocabulary
  // covers becomes [UNK].
  std::vector<int64_t> uses(static_cast<size_t>(full_size), 0);
  for (const std::string& text : corpus) {
    for (const std::string& word : full.basic_tokenize(text)) {
      const std::u32string characters = decode_utf8(word);
      for (size_t i = 0; i < characters.size(); ++i) {
        keep_if_present(i == 0 ? encode_utf8(characters[i]) : "##" + encode_utf8(characters[i]));
      }
    }
    for (const int64_t id : full.encode(text)) ++uses[static_cast<size_t>(id)];
  }
  const int64_t required = std::count(kept.begin(), kept.end(), true);
  EMBER_CHECK(required <= size, "prune_wordpiece_vocabulary: the special tokens and the {} characters the corpus's "
              "words are made of need {} tokens, more than the size {}", required - static_cast<int64_t>(
              full.special_tokens().names().size()), required, size);

  // The other pieces, most used first.
  std::vector<int64_t> candidates(static_cast<size_t>(full_size));
  std::iota(candidates.begin(), candidates.end(), int64_t{0});
  std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t a, int64_t b) {
    return uses[static_cast<size_t>(a)] > uses[static_cast<size_t>(b)];
  });
  int64_t count = required;
  for (const int64_t id : candidates) {
    if (count == size || uses[static_cast<size_t>(id)] == 0) break;
    if (kept[static_cast<size_t>(id)]) continue;
    kept[static_cast<size_t>(id)] = true;
    ++count;
  }

  std::vector<std::string> tokens;
  tokens.reserve(static_cast<size_t>(count));
  for (int64_t id = 0; id < full_size; ++id) {
    if (kept[static_cast<size_t>(id)]) tokens.push_back(vocabulary.token(id));
  }
  return WordPieceTokenizer(std::move(tokens), full.options());
}

}  // namespace ember::text
