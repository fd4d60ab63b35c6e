// Gpt2Tokenizer: GPT-2's byte-level BPE, read from GPT-2's own encoder.json and vocab.bpe, giving
// the ids GPT-2's reference encoder gives, byte for byte.
//
//   auto gpt2 = text::Gpt2Tokenizer::load("data/gpt2-vocab/encoder.json", "data/gpt2-vocab/vocab.bpe");
//   gpt2.encode("Hello world");       // {15496, 995}
//   gpt2.decode({15496, 995});        // "Hello world"
//
// How text becomes ids:
// - the text is cut into pieces by GPT-2's pattern
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   (pre_tokenize below, written out by hand): English contractions in lower case, runs of
//   letters, of numbers and of other characters, each with at most one space in front, and runs
//   of whitespace, of which the last character goes to the piece after it when one follows.
// - each piece's UTF-8 bytes are its first symbols; GPT-2's merges then join adjacent symbols,
//   the pair of lowest rank (earliest line of vocab.bpe) first.
// In GPT-2's files every byte is written as one printable character (bytes_to_unicode: the
// printable bytes of Latin-1 stand for themselves, the other 68 for U+0100 upwards, so a space is
// 'Ġ' and a newline 'Ċ'); tokens() and token_to_id() use that notation, "Ġthe" for " the".
//
// Malformed UTF-8. The reference encoder works on JavaScript strings, which cannot hold a
// malformed byte: Node decodes such bytes to U+FFFD first, so they come back as the bytes
// EF BF BD. ember keeps every byte instead: a byte that does not start a valid sequence is a
// character of its own, of the "other" class (as U+FFFD is), and is encoded as itself. So
// decode(encode(s)) == s for every byte string s, and on valid UTF-8 the ids are the reference's.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nn/text/merge_by_rank.h"
#include "nn/text/tokenizer.h"

namespace ember::text {

class Gpt2Tokenizer : public Tokenizer {
 public:
  // GPT-2's: 256 bytes, 50,000 merges and <|endoftext|>.
  static constexpr int64_t kGpt2VocabSize = 50257;
  static constexpr const char* kEndOfText = "<|endoftext|>";

  // Reads GPT-2's files: encoder.json (token -> id) and vocab.bpe (a "#version" line, then one
  // merge "left right" per line, in rank order). Every token must be a byte, the result of exactly
  // one merge, or <|endoftext|> (so GPT-2's files give 50,257); a merge may only use symbols
  // made before it. Anything else throws ember::Error naming the file and the line or key.
  static Gpt2Tokenizer load(const std::string& encoder_json_path, const std::string& vocab_bpe_path);
  // Reads a file written by save().
  static Gpt2Tokenizer load(const std::string& path);

  // The pieces GPT-2's pattern cuts `text` into (see above); their concatenation is `text`.
  static std::vector<std::string> pre_tokenize(std::string_view text);
  // The character standing for `byte` in GPT-2's files ('Ġ' for a space).
  static char32_t byte_to_symbol_character(unsigned char byte);

  std::string type() const override { return "gpt2"; }

  // Never uses an unknown token, and never produces <|endoftext|> from text: the string
  // "<|endoftext|>" is encoded as the characters it is made of, as GPT-2's encoder does.
  // Thread-safe; each distinct piece is encoded once and then cached.
  std::vector<int64_t> encode(std::string_view text) const;
  std::vector<int64_t> encode(const std::string& text) const override { return encode(std::string_view(text)); }
  std::vector<int64_t> encode(const char* text) const { return encode(std::string_view(text)); }
  // The tokens' bytes concatenated. <|endoftext|> is a structural token (begin and end of a
  // sequence, see encode_with_specials) and, as Tokenizer::decode says, is skipped; GPT-2's
  // encoder writes it out. Ids not produced by encode may concatenate to malformed UTF-8.
  std::string decode(const std::vector<int64_t>& ids) const override;
  // Writes the tokens (in GPT-2's notation, id order) and the merges in one JSON file.
  void save(const std::string& path) const override;

  int64_t end_of_text_id() const { return end_of_text_id_; }
  // The merges in rank order, in GPT-2's notation: {"Ġ", "t"} first.
  std::vector<std::pair<std::string, std::string>> merges() const;

 private:
  struct PieceCache;

  // `tokens` in id order and `merges` in rank order, both in GPT-2's notation; `where_token(id)`
  // and `where_merge(rank)` say in errors where each came from.
  template <class WhereToken, class WhereMerge>
  static Gpt2Tokenizer build(std::vector<std::string> tokens,
                             const std::vector<std::pair<std::string, std::string>>& merges,
                             const WhereToken& where_token, const WhereMerge& where_merge);
  explicit Gpt2Tokenizer(Vocabulary vocabulary);

  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;

  std::array<int32_t, 256> byte_symbol_ids_{};
  MergeTable merge_of_pair_;
  std::vector<std::pair<int32_t, int32_t>> merge_pairs_;  // in rank order
  std::vector<std::string> bytes_of_id_;                  // what decode writes for each id
  int64_t end_of_text_id_ = 0;
  // Shared by copies of the tokenizer: they have the same merges, so the same encodings.
  std::shared_ptr<PieceCache> cache_;
};

}  // namespace ember::text
