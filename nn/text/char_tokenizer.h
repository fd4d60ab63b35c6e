// CharTokenizer: one id per character (Unicode code point), the alphabet taken from a corpus.
//
//   auto chars = text::CharTokenizer::train({moby_dick_text});
//   chars.decode(chars.encode("Call me Ishmael.")) == "Call me Ishmael."
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/text/tokenizer.h"

namespace ember::text {

struct CharTokenizerOptions {
  // Characters seen fewer times in the corpus are left out (and encode to the unknown token).
  int64_t min_frequency = 1;
  // They take the first ids, in the order pad, unk, bos, eos (then cls, sep, mask if set).
  // Without an unknown token (unk = ""), encoding a character outside the alphabet throws
  // ember::Error naming the character and its byte offset.
  SpecialTokens specials = {};
};

class CharTokenizer : public Tokenizer {
 public:
  // The alphabet: every character of the corpus seen at least min_frequency times, after the
  // special tokens, in code point order. Malformed UTF-8 bytes count as U+FFFD.
  static CharTokenizer train(const std::vector<std::string>& corpus, const CharTokenizerOptions& options = {});
  // Reads a file written by save().
  static CharTokenizer load(const std::string& path);

  std::string type() const override { return "char"; }

  // One id per code point; characters outside the alphabet get the unknown token's id.
  std::vector<int64_t> encode(const std::string& text) const override;
  // The characters concatenated: decode(encode(s)) == s whenever every character of s is in
  // the alphabet. The unknown token is written as its name.
  std::string decode(const std::vector<int64_t>& ids) const override;
  void save(const std::string& path) const override;

 private:
  CharTokenizer(Vocabulary vocabulary, SpecialTokens specials, const std::string& who);
};

}  // namespace ember::text
