// The parts of Tokenizer every tokenizer shares, and load_tokenizer's dispatch on "type".
#include "nn/text/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "nn/text/bpe.h"
#include "nn/text/gpt2_tokenizer.h"
#include "nn/text/char_tokenizer.h"
#include "nn/text/json_file.h"
#include "nn/text/word_tokenizer.h"
#include "nn/text/wordpiece.h"

namespace ember::text {

std::vector<std::string> SpecialTokens::names() const {
  std::vector<std::string> set;
  for (const std::string* name : {&pad, &unk, &bos, &eos, &cls, &sep, &mask}) {
    if (!name->empty()) set.push_back(*name);
  }
  return set;
}

SpecialTokens SpecialTokens::bert() {
  return SpecialTokens{
      .pad = "[PAD]", .unk = "[UNK]", .bos = "", .eos = "", .cls = "[CLS]", .sep = "[SEP]", .mask = "[MASK]"};
}

SpecialTokens SpecialTokens::none() {
  return SpecialTokens{.pad = "", .unk = "", .bos = "", .eos = "", .cls = "", .sep = "", .mask = ""};
}

Tokenizer::Tokenizer(Vocabulary vocabulary, SpecialTokens specials, const std::string& who)
    : vocabulary_(std::move(vocabulary)), specials_(std::move(specials)) {
  for (const std::string& name : specials_.names()) {
    EMBER_CHECK(vocabulary_.contains(name), "{}: special token '{}' is not in the vocabulary", who, name);
  }
}

std::optional<int64_t> Tokenizer::special_id(const std::string& name) const {
  if (name.empty()) return std::nullopt;
  return vocabulary_.find(name);
}

int64_t Tokenizer::token_to_id(const std::string& token) const {
  const std::optional<int64_t> id = vocabulary_.find(token);
  EMBER_CHECK(id.has_value(), "{} tokenizer: token '{}' is not in the vocabulary of {} tokens", type(), token,
              vocab_size());
  return *id;
}

const std::string& Tokenizer::id_to_token(int64_t id) const {
  EMBER_CHECK(id >= 0 && id < vocab_size(), "{} tokenizer: id {} is outside the vocabulary [0, {})", type(), id,
              vocab_size());
  return vocabulary_.token(id);
}

std::vector<std::string> Tokenizer::ids_to_tokens(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) tokens.push_back(id_to_token(id));
  return tokens;
}

bool Tokenizer::is_structural_id(int64_t id) const {
  for (const std::string* name : {&specials_.pad, &specials_.bos, &specials_.eos, &specials_.cls, &specials_.sep}) {
    if (special_id(*name) == id) return true;
  }
  return false;
}

void Tokenizer::check_ids(const std::vector<int64_t>& ids, const std::string& who) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    EMBER_CHECK(ids[i] >= 0 && ids[i] < vocab_size(), "{}: id {} (position {}) is outside the vocabulary [0, {})", who,
                ids[i], i, vocab_size());
  }
}

std::vector<int64_t> Tokenizer::encode_with_specials(const std::string& text, std::optional<int64_t> max_length) const {
  const std::optional<int64_t> start = cls_id() ? cls_id() : bos_id();
  const std::optional<int64_t> end = sep_id() ? sep_id() : eos_id();
  EMBER_CHECK(start && end,
              "{} tokenizer: encode_with_specials needs a start token (cls or bos) and an end token "
              "(sep or eos), and this tokenizer lacks one",
              type());
  EMBER_CHECK(!max_length || *max_length >= 2,
              "{} tokenizer: encode_with_specials: max_length {} leaves no room for the start and end tokens", type(),
              max_length.value_or(0));
  std::vector<int64_t> ids = encode(text);
  if (max_length && static_cast<int64_t>(ids.size()) > *max_length - 2)
    ids.resize(static_cast<size_t>(*max_length - 2));
  ids.insert(ids.begin(), *start);
  ids.push_back(*end);
  return ids;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const JsonFileReader file(path, "load_tokenizer");
  const std::string type = file.string_at("type");
  if (type == "wordpiece") return std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::load(path));
  if (type == "word") return std::make_unique<WordTokenizer>(WordTokenizer::load(path));
  if (type == "char") return std::make_unique<CharTokenizer>(CharTokenizer::load(path));
  if (type == "bpe") return std::make_unique<BpeTokenizer>(BpeTokenizer::load(path));
  if (type == "gpt2") return std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load(path));
  file.fail_at("type", fmt::format("is '{}', which is none of the tokenizer types wordpiece, word, char, bpe, gpt2", type));
}

}  // namespace ember::text
