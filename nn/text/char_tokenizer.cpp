// CharTokenizer: the corpus's alphabet and the per-character lookups.
#include "nn/text/char_tokenizer.h"

#include <map>

#include "core/error.h"
#include "nn/text/json_file.h"
#include "nn/text/unicode.h"

namespace ember::text {

CharTokenizer::CharTokenizer(Vocabulary vocabulary, SpecialTokens specials, const std::string& who)
    : Tokenizer(std::move(vocabulary), std::move(specials), who) {}

CharTokenizer CharTokenizer::train(const std::vector<std::string>& corpus, const CharTokenizerOptions& options) {
  EMBER_CHECK(options.min_frequency >= 1, "CharTokenizer::train: min_frequency must be at least 1, not {}",
              options.min_frequency);
  std::map<char32_t, int64_t> counts;  // ordered: the alphabet comes out in code point order
  for (const std::string& text : corpus) {
    for (char32_t c : decode_utf8(text)) ++counts[c];
  }
  Vocabulary vocabulary;
  for (const std::string& name : options.specials.names()) vocabulary.add(name);
  for (const auto& [c, count] : counts) {
    if (count >= options.min_frequency) vocabulary.add(encode_utf8(c));
  }
  return CharTokenizer(std::move(vocabulary), options.specials, "CharTokenizer::train");
}

CharTokenizer CharTokenizer::load(const std::string& path) {
  const JsonFileReader file(path, "CharTokenizer::load");
  file.expect_type("char");
  SpecialTokens specials = file.special_tokens();
  try {
    return CharTokenizer(Vocabulary(file.strings_at("vocabulary")), std::move(specials), "CharTokenizer::load");
  } catch (const Error& error) {
    file.fail_at("vocabulary", fmt::format("does not fit the special tokens: {}", error.what()));
  }
}

void CharTokenizer::save(const std::string& path) const {
  nlohmann::ordered_json document = tokenizer_document(type(), specials_);
  document["vocabulary"] = vocabulary_.tokens();
  write_json_file(path, document, "CharTokenizer::save");
}

std::vector<int64_t> CharTokenizer::encode(const std::string& text) const {
  const std::optional<int64_t> unknown = unk_id();
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  std::string character;
  for (size_t offset = 0; offset < text.size();) {
    const DecodedCodePoint decoded = decode_utf8_at(text, offset);
    character.clear();
    append_utf8(character, decoded.code_point);
    const std::optional<int64_t> id = vocabulary_.find(character);
    EMBER_CHECK(id || unknown,
                "CharTokenizer::encode: character '{}' ({}) at byte offset {} is not in the alphabet of {} characters, "
                "and the tokenizer has no unknown token",
                character, code_point_name(decoded.code_point), offset, vocab_size());
    ids.push_back(id ? *id : *unknown);
    offset += decoded.length;
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  check_ids(ids, "CharTokenizer::decode");
  std::string text;
  for (int64_t id : ids) {
    if (!is_structural_id(id)) text += vocabulary_.token(id);
  }
  return text;
}

}  // namespace ember::text
