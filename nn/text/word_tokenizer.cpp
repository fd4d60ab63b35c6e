// WordTokenizer: counting a corpus's words, choosing the vocabulary, and the lookups.
#include "nn/text/word_tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "nn/text/json_file.h"
#include "nn/text/unicode.h"  // to_lower
#include "nn/text/words.h"

namespace ember::text {

namespace {

std::vector<std::string> words_of(const std::string& text, bool lowercase) {
  std::vector<std::string> words = split_words(text);
  if (lowercase) {
    for (std::string& word : words) word = to_lower(word);
  }
  return words;
}

}  // namespace

WordTokenizer::WordTokenizer(Vocabulary vocabulary, SpecialTokens specials, bool lowercase, const std::string& who)
    : Tokenizer(std::move(vocabulary), std::move(specials), who), lowercase_(lowercase) {}

WordTokenizer WordTokenizer::train(const std::vector<std::string>& corpus, const WordTokenizerOptions& options) {
  const std::vector<std::string> special_names = options.specials.names();
  EMBER_CHECK(options.min_frequency >= 1, "WordTokenizer::train: min_frequency must be at least 1, not {}",
              options.min_frequency);
  EMBER_CHECK(!options.max_vocab_size || *options.max_vocab_size >= static_cast<int64_t>(special_names.size()),
              "WordTokenizer::train: max_vocab_size {} is smaller than the {} special tokens",
              options.max_vocab_size.value_or(0), special_names.size());

  std::unordered_map<std::string, int64_t> counts;
  for (const std::string& sentence : corpus) {
    for (std::string& word : words_of(sentence, options.lowercase)) ++counts[std::move(word)];
  }
  std::vector<std::pair<std::string, int64_t>> frequent;
  for (auto& [word, count] : counts) {
    if (count >= options.min_frequency) frequent.emplace_back(word, count);
  }
  // Most frequent first; ties alphabetically, so the same corpus always gives the same ids.
  std::sort(frequent.begin(), frequent.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });

  Vocabulary vocabulary;
  for (const std::string& name : special_names) vocabulary.add(name);
  for (const auto& [word, count] : frequent) {
    if (options.max_vocab_size && vocabulary.size() >= *options.max_vocab_size) break;
    vocabulary.add(word);
  }
  return WordTokenizer(std::move(vocabulary), options.specials, options.lowercase, "WordTokenizer::train");
}

WordTokenizer WordTokenizer::load(const std::string& path) {
  const JsonFileReader file(path, "WordTokenizer::load");
  file.expect_type("word");
  SpecialTokens specials = file.special_tokens();
  const bool lowercase = file.boolean_at("lowercase");
  try {
    return WordTokenizer(Vocabulary(file.strings_at("vocabulary")), std::move(specials), lowercase,
                         "WordTokenizer::load");
  } catch (const Error& error) {
    file.fail_at("vocabulary", fmt::format("does not fit the special tokens: {}", error.what()));
  }
}

void WordTokenizer::save(const std::string& path) const {
  nlohmann::ordered_json document = tokenizer_document(type(), specials_);
  document["lowercase"] = lowercase_;
  document["vocabulary"] = vocabulary_.tokens();
  write_json_file(path, document, "WordTokenizer::save");
}

std::vector<std::string> WordTokenizer::tokenize(const std::string& text) const { return words_of(text, lowercase_); }

std::vector<int64_t> WordTokenizer::encode(const std::string& text) const {
  const std::optional<int64_t> unknown = unk_id();
  std::vector<int64_t> ids;
  for (const std::string& word : tokenize(text)) {
    const std::optional<int64_t> id = vocabulary_.find(word);
    EMBER_CHECK(id || unknown,
                "WordTokenizer::encode: word '{}' is not in the vocabulary, and the tokenizer has no unknown token",
                word);
    ids.push_back(id ? *id : *unknown);
  }
  return ids;
}

std::string WordTokenizer::decode(const std::vector<int64_t>& ids) const {
  check_ids(ids, "WordTokenizer::decode");
  std::vector<std::string> words;
  for (int64_t id : ids) {
    if (!is_structural_id(id)) words.push_back(vocabulary_.token(id));
  }
  return join_words(words);
}

}  // namespace ember::text
