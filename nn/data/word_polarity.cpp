// Reading a polarity lexicon and marking its words in a sequence of word pieces.
#include "nn/data/word_polarity.h"

#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/ops/cross_entropy.h"
#include "nn/data/data_files.h"
#include "nn/io/json_reader.h"

namespace ember::datasets {

PolarityLexicon read_polarity_lexicon(const std::string& path, const text::WordPieceTokenizer& tokenizer) {
  const std::string content = read_data_file(path, "sentiment", "read_polarity_lexicon");
  const nlohmann::json scores = parse_json(content, path, "read_polarity_lexicon");
  EMBER_CHECK(scores.is_object(), "read_polarity_lexicon: {}: expected a JSON object of word -> score, found a JSON {}",
              path, scores.type_name());
  PolarityLexicon lexicon;
  for (const auto& [entry, value] : scores.items()) {
    ++lexicon.entries_read;
    const std::optional<int64_t> read = json_to_int64(value);
    EMBER_CHECK(read && *read >= -5 && *read <= 5,
                "read_polarity_lexicon: {}: the score of \"{}\" must be an integer from -5 to 5, got {}", path, entry,
                json_value_for_error(value));
    const int64_t score = *read;
    const std::vector<std::string> words = tokenizer.basic_tokenize(entry);
    if (words.size() != 1) {
      ++lexicon.phrases_skipped;
      continue;
    }
    if (score == 0) continue;
    const int64_t polarity = score > 0 ? 1 : 0;
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
  std::vector<int64_t> targets(ids.size(), kIgnoreIndex);
  size_t i = 0;
  // The end of a word begun in the sequence before.
  while (i < ids.size() && tokenizer.is_continuation(ids[i])) ++i;
  while (i < ids.size()) {
    size_t end = i + 1;
    while (end < ids.size() && tokenizer.is_continuation(ids[end])) ++end;
    // The word as decode glues its pieces. [CLS] or [UNK] never matches: basic_tokenize splits
    // brackets off, so no lexicon word holds one.
    const std::string word = tokenizer.decode(std::vector<int64_t>(ids.begin() + i, ids.begin() + end));
    if (const auto found = lexicon.polarity.find(word); found != lexicon.polarity.end()) targets[i] = found->second;
    i = end;
  }
  return targets;
}

}  // namespace ember::datasets
