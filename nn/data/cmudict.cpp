// Reading the CMU Pronouncing Dictionary and splitting it.
#include "nn/data/cmudict.h"

#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "nn/data/data_files.h"

namespace ember::datasets {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Splits on runs of spaces and tabs.
std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

// An ARPAbet symbol: upper case letters, then an optional stress digit 0, 1 or 2 (AH0, M).
bool is_phoneme(std::string_view symbol) {
  size_t letters = 0;
  while (letters < symbol.size() && is_upper(symbol[letters])) ++letters;
  if (letters == 0) return false;
  if (letters == symbol.size()) return true;
  return letters + 1 == symbol.size() && symbol[letters] >= '0' && symbol[letters] <= '2';
}

// WORD(1), WORD(2), ...: an alternative pronunciation of WORD.
bool is_variant(std::string_view word) {
  const size_t open = word.find('(');
  if (open == std::string_view::npos || open == 0 || word.back() != ')' || open + 2 >= word.size()) return false;
  for (size_t i = open + 1; i + 1 < word.size(); ++i) {
    if (!is_digit(word[i])) return false;
  }
  return true;
}

bool has_only_letters_and_apostrophes(std::string_view word) {
  for (char c : word) {
    if (!is_upper(c) && c != '\'') return false;
  }
  return true;
}

}  // namespace

CmudictData read_cmudict(const std::string& path) {
  const std::string content = read_data_file(path, "cmudict", "read_cmudict");
  const std::string_view text = content;
  CmudictData data;
  std::vector<Pronunciation> words;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos || line.starts_with(";;;")) continue;

    ++data.lines_read;
    const std::vector<std::string_view> fields = split_words(line);
    bool well_formed = !is_space(line.front()) && fields.size() >= 2;
    for (size_t i = 1; well_formed && i < fields.size(); ++i) well_formed = is_phoneme(fields[i]);
    if (!well_formed) {
      ++data.malformed_skipped;
    } else if (is_variant(fields[0])) {
      ++data.variants_dropped;
    } else if (!has_only_letters_and_apostrophes(fields[0])) {
      ++data.words_filtered;
    } else {
      Pronunciation entry{std::string(fields[0]), {}};
      entry.phonemes.assign(fields.begin() + 1, fields.end());
      words.push_back(std::move(entry));
    }
  }
  EMBER_CHECK(!words.empty(), "read_cmudict: no usable entry in {} ({} lines read, {} malformed)", path,
              data.lines_read, data.malformed_skipped);
  for (size_t i = 0; i < words.size(); ++i) {
    (i % 20 == 0 ? data.test : data.train).push_back(std::move(words[i]));
  }
  return data;
}

CmudictData load_cmudict(const std::string& data_dir) {
  return read_cmudict((std::filesystem::path(data_dir) / "cmudict/dict.txt").string());
}

}  // namespace ember::datasets
