// Reading a polarity lexicon and marking its words in a sequence of word pieces.
#include "nn/data/word_polarity.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "nn/data/data_files.h"

namespace ember::datasets {

PolarityLexicon read_polarity_lexicon(const std::string& path, const text::WordPieceTokenizer& tokenizer) {
  const std::string content = read_data_file(path, "sentiment", "read_polarity_lexicon");
  nlohmann::json scores;
  try {
    scores = nlohmann::json::parse(content);
  } catch (const nlohmann::json::exception& error) {
    fail("read_polarity_lexicon: {}: not valid JSON: {}", path, error.what());
  }
  EMBER_CHECK(scores.is_object(), "read_polarity_lexicon: {}: expected a JSON object of word -> score, found a JSON {}",
              path, scores.type_name());
  PolarityLexicon lexicon;
  for (const auto& [entry, score] : scores.items()) {
    ++lexicon.entries_read;
    EMBER_CHECK(score.is_number_integer() && score.get<int64_t>() >= -5 && score.get<int64_t>() <= 5,
                "read_polarity_lexicon: {}: the score of \"{}\" must be an integer from -5 to 5, got {}", path, entry,
                score.dump());
    const std::vector<std::string> words = tokenizer.basic_tokenize(entry);
    if (words.size() != 1) {
      ++lexicon.phrases_skipped;
      continue;
    }
    if (score.get<int64_t>() == 0) continue;
    const int64_t polarity = score.get<int64_t>() > 0 ? 1 : 0;
    const auto [where, inserted] = lexicon.polarity.emplace(words[0], polarity);
    EMBER_CHECK(inserted || where->second == polarity,
                "read_polarity_lexicon: {}: \"{}\" and another entry are both the word \"{}\", with opposite "
                "polarities",
                path, entry, words[0]);
  }
  EMBER_CHECK(!lexicon.polarity.empty(), "read_polarity_lexicon: {}: no word with a polarity", path);
  return lexicon;
}

PolarityLexicon load_afinn(const std::string& data_dir, const text::WordPieceTokenizer& tokenizer) {
  return read_polarity_lexicon((std::filesystem::path(data_dir) / "sentiment" / "afinn-165.json").string(), tokenizer);
}

std::vector<int64_t> word_polarity_targets(const std::vector<int64_t>& ids, const text::WordPieceTokenizer& tokenizer,
                                           const PolarityLexicon& lexicon) {
  const auto is_continuation = [&](int64_t id) { return tokenizer.id_to_token(id).starts_with("##"); };
  std::vector<int64_t> targets(ids.size(), -100);
  size_t i = 0;
  while (i < ids.size() && is_continuation(ids[i])) ++i;  // the end of a word begun in the sequence before
  while (i < ids.size()) {
    size_t end = i + 1;
    std::string word = tokenizer.id_to_token(ids[i]);
    for (; end < ids.size() && is_continuation(ids[end]); ++end) word += tokenizer.id_to_token(ids[end]).substr(2);
    // "[CLS]" or "[UNK]" never matches: basic_tokenize splits brackets off, so no lexicon word holds one.
    if (const auto found = lexicon.polarity.find(word); found != lexicon.polarity.end()) targets[i] = found->second;
    i = end;
  }
  return targets;
}

}  // namespace ember::datasets
