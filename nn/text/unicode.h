// Unicode helpers for the tokenizers: UTF-8 decoding and encoding (unicode_utf8.cpp), the
// character classes BERT's basic tokenizer splits on (unicode_classes.cpp), lower-casing
// (unicode_case.cpp) and accent stripping (unicode_accents.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ember::text {

// What a malformed byte decodes to. Tokenizers take text from users and files, so a stray
// byte must not stop them: every byte that does not start a valid UTF-8 sequence (a bad lead
// byte, a truncated or overlong sequence, an encoded surrogate, a value above U+10FFFF)
// decodes to one U+FFFD, and decoding resumes at the next byte.
inline constexpr char32_t kReplacementCharacter = U'\uFFFD';

// One code point read from UTF-8 text and the number of bytes it took (1 for a malformed byte).
struct DecodedCodePoint {
  char32_t code_point;
  size_t length;
};

// Decodes the code point that starts at byte `offset` of `text`; an offset past the end throws.
DecodedCodePoint decode_utf8_at(std::string_view text, size_t offset);

// Decodes a whole string; malformed bytes become U+FFFD (one per byte).
std::u32string decode_utf8(std::string_view text);

// The byte offset of the first malformed byte, or nullopt when `text` is valid UTF-8.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// `text` with every malformed byte replaced by U+FFFD: safe to print or to store in JSON.
std::string to_valid_utf8(std::string_view text);

// Appends the UTF-8 bytes of `code_point`; a surrogate or a value above U+10FFFF throws
// ember::Error naming it.
void append_utf8(std::string& out, char32_t code_point);
std::string encode_utf8(char32_t code_point);
std::string encode_utf8(std::u32string_view code_points);

// "U+00E9": how error messages name a character.
std::string code_point_name(char32_t code_point);

// --- character classes, as BERT's basic tokenizer defines them ---------------------------------

// Unicode White_Space: space, \t \n \v \f \r, U+0085, no-break and typographic spaces, the line
// and paragraph separators, the ideographic space.
bool is_whitespace(char32_t c);

// Characters BERT removes while cleaning text: C0/C1 controls other than \t \n \r (which count
// as whitespace), format characters (soft hyphen, zero-width space and joiners, bidi marks, the
// byte-order mark, ...) and private-use characters.
bool is_control(char32_t c);

// Every printable ASCII character that is not a letter or digit ($ + < = > ^ ` | ~ included,
// as in BERT), plus the Unicode punctuation (category P) of Latin-1, Greek, Armenian, Hebrew,
// Arabic, Devanagari, Thai, General Punctuation U+2010-U+205E, Supplemental Punctuation, CJK
// Symbols and Punctuation, and the vertical, small and fullwidth forms.
bool is_punctuation(char32_t c);

// The CJK ideograph blocks BERT puts spaces around (the Unified Ideographs and their extensions
// A to F, and the compatibility ideographs). Kana and Hangul are not among them, as in BERT.
bool is_cjk_ideograph(char32_t c);

// --- case and accents ------------------------------------------------------------------------

// Lower case of one character for ASCII, Latin-1, Latin Extended-A, Latin Extended Additional,
// Greek, Cyrillic, Armenian and fullwidth Latin; other characters are returned unchanged.
// U+0130 (capital I with dot) maps to plain 'i'.
char32_t to_lower(char32_t c);

// Lower-cases a string; a capital sigma at the end of a word becomes the final form U+03C2,
// as Python's str.lower() does.
std::u32string to_lower(std::u32string_view text);
std::string to_lower(std::string_view utf8);

// Removes accents the way BERT uncased does (canonical decomposition, then dropping the
// combining marks): Latin, Greek and Cyrillic letters with diacritics become their base letter
// (é -> e, Ÿ -> Y, ά -> α, й -> и), kana with (han)dakuten lose them (が -> か), Hangul
// syllables become their jamo (as their decomposition does), and combining marks (U+0300-U+036F
// and the other combining diacritical blocks) are removed. Letters that have no decomposition
// (ø, ł, æ, ß, đ) stay as they are.
std::u32string strip_accents(std::u32string_view text);

// True for the combining marks strip_accents removes.
bool is_combining_mark(char32_t c);

}  // namespace ember::text
