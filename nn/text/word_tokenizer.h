// WordTokenizer: one id per word or punctuation mark, the vocabulary built from a corpus.
//
//   text::WordTokenizerOptions options;
//   options.min_frequency = 2;
//   options.lowercase = true;
//   auto words = text::WordTokenizer::train(train_sentences, options);
//   words.encode("A great movie!");   // ids of "a" "great" "movie" "!"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/text/tokenizer.h"

namespace ember::text {

struct WordTokenizerOptions {
  // Words seen fewer times in the corpus are left out (and encode to the unknown token).
  int64_t min_frequency = 1;
  // The largest vocabulary, special tokens included: the most frequent words are kept (ties in
  // alphabetical order). nullopt: no limit.
  std::optional<int64_t> max_vocab_size = std::nullopt;
  // Lower-case the corpus and every text encoded later.
  bool lowercase = false;
  // They take the first ids, in the order pad, unk, bos, eos (then cls, sep, mask if set).
  // Without an unknown token (unk = ""), encoding an unknown word throws.
  SpecialTokens specials = {};
};

class WordTokenizer : public Tokenizer {
 public:
  // Splits every sentence with split_words (nn/text/words.h) and counts the words.
  static WordTokenizer train(const std::vector<std::string>& corpus, const WordTokenizerOptions& options = {});
  // Reads a file written by save().
  static WordTokenizer load(const std::string& path);

  std::string type() const override { return "word"; }
  bool lowercase() const { return lowercase_; }

  // The words of `text` as the vocabulary is searched for them (lower-cased if lowercase()).
  std::vector<std::string> tokenize(const std::string& text) const;
  // One id per word; unknown words get the unknown token's id.
  std::vector<int64_t> encode(const std::string& text) const override;
  // The words joined with join_words (nn/text/words.h): spaces between words, punctuation attached.
  std::string decode(const std::vector<int64_t>& ids) const override;
  void save(const std::string& path) const override;

 private:
  WordTokenizer(Vocabulary vocabulary, SpecialTokens specials, bool lowercase, const std::string& who);
  bool lowercase_;
};

}  // namespace ember::text
