// Tokenizer: what every ember tokenizer offers (text <-> ids, its vocabulary, its special
// tokens, saving to JSON), and load_tokenizer, which reads any of them back from its file.
//
//   auto tokenizer = text::BpeTokenizer::train(sentences, 8000);
//   std::vector<int64_t> ids = tokenizer.encode("Das ist ein kleiner Test.");
//   tokenizer.save("run/tokenizer.json");
//   std::unique_ptr<text::Tokenizer> same = text::load_tokenizer("run/tokenizer.json");
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/text/vocabulary.h"

namespace ember::text {

// The names of a tokenizer's special tokens; an empty name means the tokenizer has none of
// that kind. Special tokens are never produced from text: "[PAD]" in a sentence is split into
// "[", "pad", "]" like any other punctuation and word, so user text cannot forge them.
struct SpecialTokens {
  std::string pad = "[PAD]";  // fills a batch up to its longest sequence
  std::string unk = "[UNK]";  // stands for what the vocabulary cannot express
  std::string bos = "[BOS]";  // begins a sequence (decoder inputs, language models)
  std::string eos = "[EOS]";  // ends a sequence
  std::string cls = "";       // BERT's first token, whose output a classifier reads
  std::string sep = "";       // BERT's end-of-segment token
  std::string mask = "";      // BERT's masked-language-model token

  // The names that are set, in the order pad, unk, bos, eos, cls, sep, mask.
  std::vector<std::string> names() const;
  // BERT's set: [PAD] [UNK] [CLS] [SEP] [MASK], no [BOS]/[EOS].
  static SpecialTokens bert();
  // No special tokens at all.
  static SpecialTokens none();
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "wordpiece", "word", "char", "bpe" or "gpt2": the "type" field of the saved file.
  virtual std::string type() const = 0;

  // Token ids of `text`, without special tokens. Any string is accepted, the empty one (no
  // ids) and malformed UTF-8 included; what the vocabulary cannot express becomes the
  // unknown token (CharTokenizer built without one throws instead).
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;

  // Text of `ids`. The structural tokens (pad, bos, eos, cls, sep) are skipped; unk and mask
  // are written as their names. An id outside [0, vocab_size()) throws ember::Error.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;

  // Writes the tokenizer to `path` as JSON with a "type" field (atomically: a crash mid-write
  // leaves any previous file intact). Read it back with load_tokenizer or the class's load().
  virtual void save(const std::string& path) const = 0;

  // encode(text) between the start token (cls if the tokenizer has one, else bos) and the end
  // token (sep, else eos): [CLS] ids [SEP] for BERT, [BOS] ids [EOS] for the others. With
  // max_length, the text's ids are cut so that the whole sequence has at most max_length ids
  // (the end token is kept). Throws when the tokenizer lacks those special tokens or when
  // max_length is smaller than the number of special tokens.
  std::vector<int64_t> encode_with_specials(const std::string& text,
                                            std::optional<int64_t> max_length = std::nullopt) const;

  int64_t vocab_size() const { return vocabulary_.size(); }
  const Vocabulary& vocabulary() const { return vocabulary_; }
  bool contains(const std::string& token) const { return vocabulary_.contains(token); }
  // The id of a token (in the tokenizer's own notation: "##ing" for WordPiece); throws
  // ember::Error naming the token when it is not in the vocabulary.
  int64_t token_to_id(const std::string& token) const;
  // The token of an id; throws ember::Error when id is outside [0, vocab_size()).
  const std::string& id_to_token(int64_t id) const;
  // The tokens of several ids, e.g. to label the rows of an attention map.
  std::vector<std::string> ids_to_tokens(const std::vector<int64_t>& ids) const;

  const SpecialTokens& special_tokens() const { return specials_; }
  // The id of each special token, or nullopt when the tokenizer has none of that kind.
  std::optional<int64_t> pad_id() const { return special_id(specials_.pad); }
  std::optional<int64_t> unk_id() const { return special_id(specials_.unk); }
  std::optional<int64_t> bos_id() const { return special_id(specials_.bos); }
  std::optional<int64_t> eos_id() const { return special_id(specials_.eos); }
  std::optional<int64_t> cls_id() const { return special_id(specials_.cls); }
  std::optional<int64_t> sep_id() const { return special_id(specials_.sep); }
  std::optional<int64_t> mask_id() const { return special_id(specials_.mask); }
  // True for pad, bos, eos, cls and sep: the ids decode() skips.
  bool is_structural_id(int64_t id) const;

 protected:
  // Protected so that a Tokenizer& cannot be sliced; the classes themselves copy and move.
  Tokenizer(const Tokenizer&) = default;
  Tokenizer(Tokenizer&&) = default;
  Tokenizer& operator=(const Tokenizer&) = default;
  Tokenizer& operator=(Tokenizer&&) = default;
  // Every special name that is set must be in the vocabulary; `who` names the caller in the
  // error.
  Tokenizer(Vocabulary vocabulary, SpecialTokens specials, const std::string& who);

  // Checks that every id is inside the vocabulary; `who` names the caller in the error.
  void check_ids(const std::vector<int64_t>& ids, const std::string& who) const;

  Vocabulary vocabulary_;
  SpecialTokens specials_;

 private:
  std::optional<int64_t> special_id(const std::string& name) const;
};

// Reads a tokenizer saved by any ember tokenizer's save(), choosing the class by the file's
// "type" field. A missing file, a file that is not JSON, or one whose keys are missing or of
// the wrong kind throws ember::Error naming the path and the key.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace ember::text
