// BpeTokenizer: byte-pair encoding learned from a corpus. Every byte is a base symbol, so no
// input is ever unknown, and decode(encode(s)) == s for every string s, byte for byte.
//
//   auto bpe = text::BpeTokenizer::train(german_and_english_sentences, 8000);
//   std::vector<int64_t> ids = bpe.encode("Die Insel ist voll von Sommergästen.");
//   bpe.decode(ids);   // "Die Insel ist voll von Sommergästen."
//
// How text becomes symbols:
// - pre_split cuts the text into pieces no merge crosses: runs of letters, digits and other
//   symbols (a word), runs of punctuation, runs of whitespace. A single space before a word or a
//   punctuation run belongs to it, as its first byte: the space is the word-start marker, so
//   "a cat" is "a" + " cat", and " cat" and "cat" (at the start of a text) are different
//   symbols, as in GPT-2.
// - each piece starts as its bytes (ids kFirstByteId + byte); merges learned in training then
//   join adjacent symbols, lowest rank first.
// The ids: [PAD]=0 [UNK]=1 [BOS]=2 [EOS]=3, the 256 bytes 4..259, then one symbol per merge.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nn/text/merge_by_rank.h"
#include "nn/text/tokenizer.h"

namespace ember::text {

struct BpeOptions {
  // Training stops early, below the asked vocabulary size, when the most frequent pair of
  // symbols occurs fewer times than this in the corpus.
  int64_t min_pair_frequency = 2;
};

class BpeTokenizer : public Tokenizer {
 public:
  static constexpr int64_t kFirstByteId = 4;
  static constexpr int64_t kBaseVocabSize = kFirstByteId + 256;

  // Learns merges from `corpus` until the vocabulary has `vocab_size` symbols (specials and
  // bytes included, so vocab_size >= 260) or no pair is frequent enough. Repeatable: the same
  // corpus and size give the same merges (ties go to the pair with the smaller ids).
  static BpeTokenizer train(const std::vector<std::string>& corpus, int64_t vocab_size, const BpeOptions& options = {});
  // Reads a file written by save().
  static BpeTokenizer load(const std::string& path);

  // The pieces no merge crosses (see above); their concatenation is `text`.
  static std::vector<std::string> pre_split(std::string_view text);

  std::string type() const override { return "bpe"; }

  // The learned merges in rank order: merge i joins symbols first and second.
  const std::vector<std::pair<int64_t, int64_t>>& merges() const { return merges_; }

  // The symbols of `text` as byte strings (id_to_token of each id).
  std::vector<std::string> tokenize(const std::string& text) const;
  // Never uses [UNK]. Thread-safe; each distinct piece is encoded once and then cached.
  std::vector<int64_t> encode(const std::string& text) const override;
  // The symbols' bytes concatenated (the structural tokens skipped). Ids not produced by
  // encode may concatenate to malformed UTF-8: text::to_valid_utf8 makes such text printable.
  std::string decode(const std::vector<int64_t>& ids) const override;
  // Writes the merges (as id pairs) and, for people reading the file, every symbol's text with
  // malformed bytes written as <0xHH>.
  void save(const std::string& path) const override;

 private:
  struct Cache {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int64_t>> ids_of_piece;
  };

  // Replays `merges` over the base vocabulary; throws naming `who` when a merge refers to an id
  // that does not exist yet.
  BpeTokenizer(std::vector<std::pair<int64_t, int64_t>> merges, const std::string& who);
  void encode_piece(std::string_view piece, std::vector<int64_t>& ids) const;

  std::vector<std::pair<int64_t, int64_t>> merges_;
  MergeTable merge_of_pair_;
  // Shared by copies of the tokenizer: they have the same merges, so the same encodings.
  std::shared_ptr<Cache> cache_ = std::make_shared<Cache>();
};

}  // namespace ember::text
