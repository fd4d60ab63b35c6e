// Splitting text into words and punctuation (BERT's basic tokenizer) and joining words back
// into readable text: the word-level tokenizer is these two functions plus a vocabulary.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ember::text {

// Whitespace separates words; every punctuation character and every CJK ideograph is a word of
// its own; control characters are dropped (is_whitespace, is_punctuation, is_cjk_ideograph,
// is_control in nn/text/unicode.h). Malformed UTF-8 bytes become U+FFFD.
//   "Don't panic!" -> "Don" "'" "t" "panic" "!"
std::vector<std::string> split_words(std::string_view text);

// The words separated by single spaces, except around punctuation that is written attached in
// English text: no space before . , ; : ! ? ) ] } % and closing quotes, none after ( [ { and
// opening quotes, none around hyphens and slashes, and none around the apostrophe of a
// contraction or an elision ("don ' t" -> "don't", "it ' s" -> "it's", "l ' eau" -> "l'eau").
std::string join_words(const std::vector<std::string>& words);

}  // namespace ember::text
