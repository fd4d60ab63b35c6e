// Extracting German-English sentence pairs from the Ding dictionary, and splitting them.
#include "nn/data/de_en.h"

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <tuple>

#include "core/error.h"
#include "nn/data/data_files.h"

namespace ember::datasets {

namespace {

bool is_opening(char c) { return c == '(' || c == '[' || c == '{'; }
bool is_closing(char c) { return c == ')' || c == ']' || c == '}'; }
bool is_space(char c) { return c == ' ' || c == '\t'; }

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    if (end == std::string_view::npos) break;
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  parts.push_back(text.substr(start));
  return parts;
}

// The text before the first ';' outside brackets: annotations such as "(Druck; Vakuum)" hold
// semicolons of their own.
std::string_view first_variant(std::string_view sub_entry) {
  int depth = 0;
  for (size_t i = 0; i < sub_entry.size(); ++i) {
    const char c = sub_entry[i];
    if (is_opening(c)) {
      ++depth;
    } else if (is_closing(c)) {
      depth = std::max(depth - 1, 0);
    } else if (c == ';' && depth == 0) {
      return sub_entry.substr(0, i);
    }
  }
  return sub_entry;
}

// The variant without its annotations, with single spaces and no space at either end.
std::string clean_variant(std::string_view variant) {
  std::string out;
  out.reserve(variant.size());
  int depth = 0;
  bool pending_space = false;
  for (const char c : variant) {
    if (is_opening(c)) {
      ++depth;
    } else if (is_closing(c)) {
      depth = std::max(depth - 1, 0);
    } else if (depth > 0) {
      // inside an annotation
    } else if (is_space(c)) {
      pending_space = !out.empty();
    } else {
      if (pending_space) out.push_back(' ');
      pending_space = false;
      out.push_back(c);
    }
  }
  return out;
}

// Ends in '.', '?' or '!' and has at least 4 words (clean text: words are split by one space).
bool is_sentence(const std::string& text) {
  if (text.empty()) return false;
  const char last = text.back();
  if (last != '.' && last != '?' && last != '!') return false;
  return std::count(text.begin(), text.end(), ' ') >= 3;
}

}  // namespace

GermanEnglishData read_de_en(const std::string& path) {
  const std::string content = read_data_file(path, "de-en", "read_de_en");
  const std::string_view text = content;
  check_utf8(text, path, "read_de_en");

  GermanEnglishData data;
  std::vector<GermanEnglishPair> pairs;
  constexpr std::string_view kSeparator = " :: ";
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with('#')) {
      ++data.comment_lines;
      continue;
    }
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;

    ++data.lines_read;
    const size_t separator = line.find(kSeparator);
    if (separator == std::string_view::npos ||
        line.find(kSeparator, separator + kSeparator.size()) != std::string_view::npos) {
      ++data.malformed_skipped;
      continue;
    }
    const std::vector<std::string_view> german = split(line.substr(0, separator), '|');
    const std::vector<std::string_view> english = split(line.substr(separator + kSeparator.size()), '|');
    if (german.size() != english.size()) {
      ++data.mismatched_skipped;
      continue;
    }
    for (size_t i = 0; i < german.size(); ++i) {
      std::string german_sentence = clean_variant(first_variant(german[i]));
      if (!is_sentence(german_sentence)) continue;
      std::string english_sentence = clean_variant(first_variant(english[i]));
      if (!is_sentence(english_sentence)) continue;
      pairs.push_back({std::move(german_sentence), std::move(english_sentence)});
    }
  }
  data.sentence_pairs = static_cast<int64_t>(pairs.size());

  // std::string compares with char_traits<char>, which orders bytes as unsigned values: the
  // byte order DATA.md asks for, whatever the signedness of char.
  const auto key = [](const GermanEnglishPair& pair) { return std::tie(pair.german, pair.english); };
  std::sort(pairs.begin(), pairs.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  pairs.erase(std::unique(pairs.begin(), pairs.end(), [&](const auto& a, const auto& b) { return key(a) == key(b); }),
              pairs.end());
  data.duplicates_removed = data.sentence_pairs - static_cast<int64_t>(pairs.size());
  EMBER_CHECK(!pairs.empty(), "read_de_en: no sentence pair found in {} ({} lines read)", path, data.lines_read);

  for (size_t i = 0; i < pairs.size(); ++i) {
    (i % 20 == 0 ? data.test : data.train).push_back(std::move(pairs[i]));
  }
  return data;
}

GermanEnglishData load_de_en(const std::string& data_dir) {
  return read_de_en((std::filesystem::path(data_dir) / "de-en/de-en.txt").string());
}

}  // namespace ember::datasets
