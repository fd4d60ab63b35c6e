// split_words and join_words: words and punctuation apart, and back together.
#include "nn/text/words.h"

#include <algorithm>
#include <cctype>

#include "nn/text/unicode.h"

namespace ember::text {

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  const auto end_word = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (size_t offset = 0; offset < text.size();) {
    const DecodedCodePoint decoded = decode_utf8_at(text, offset);
    offset += decoded.length;
    const char32_t c = decoded.code_point;
    if (is_whitespace(c)) {
      end_word();
    } else if (is_control(c)) {
      continue;
    } else if (is_punctuation(c) || is_cjk_ideograph(c)) {
      end_word();
      words.push_back(encode_utf8(c));
    } else {
      append_utf8(word, c);
    }
  }
  end_word();
  return words;
}

namespace {

bool is_one_of(std::string_view word, std::initializer_list<std::string_view> options) {
  return std::find(options.begin(), options.end(), word) != options.end();
}

// Attached to the word before it.
bool closes(std::string_view word) {
  return is_one_of(word, {".", ",", ";", ":", "!", "?", ")", "]", "}", "%", "\u201D", "\u2019", "\u00BB", "\u2026",
                          "\u3001", "\u3002", "\uFF0C", "\uFF01", "\uFF1F"});
}

// Attached to the word after it.
bool opens(std::string_view word) {
  return is_one_of(word, {"(", "[", "{", "\u201C", "\u2018", "\u00AB", "\u00BF", "\u00A1", "$"});
}

// Attached on both sides.
bool joins(std::string_view word) { return is_one_of(word, {"-", "/", "\u2010", "\u2011"}); }

// The part after the apostrophe of an English contraction.
bool is_contraction_suffix(std::string word) {
  std::transform(word.begin(), word.end(), word.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return is_one_of(word, {"s", "t", "re", "ve", "ll", "d", "m"});
}

// A one-letter word before an apostrophe is an elision: l'homme, d'accord, s'il.
bool is_elided(const std::string& word) {
  return word.size() == 1 && std::isalpha(static_cast<unsigned char>(word[0]));
}

}  // namespace

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  bool glue_next = true;  // no space before the first word
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    const bool apostrophe = word == "'" && i > 0 && i + 1 < words.size() &&
                            (is_contraction_suffix(words[i + 1]) || is_elided(words[i - 1]));
    if (!glue_next && !closes(word) && !joins(word) && !apostrophe) out += ' ';
    out += word;
    glue_next = opens(word) || joins(word) || apostrophe;
  }
  return out;
}

}  // namespace ember::text
