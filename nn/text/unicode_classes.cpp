// The character classes of BERT's basic tokenizer (whitespace, controls, punctuation, CJK
// ideographs) and the combining marks, as sorted tables of code point ranges. The tables cover
// the scripts ember's data sets and BERT's vocabulary meet most; they were checked against the
// Unicode character database.
#include <algorithm>
#include <iterator>
#include <span>

#include "nn/text/unicode.h"

namespace ember::text {

namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

// `ranges` must be sorted and disjoint: the only candidate is then the last range that starts
// at or before c.
bool in_ranges(std::span<const CodePointRange> ranges, char32_t c) {
  auto after = std::upper_bound(ranges.begin(), ranges.end(), c,
                                [](char32_t value, const CodePointRange& range) { return value < range.first; });
  return after != ranges.begin() && c <= std::prev(after)->last;
}

}  // namespace

bool is_whitespace(char32_t c) {
  static constexpr CodePointRange kWhitespace[] = {
      {0x0009, 0x000D}, {0x0020, 0x0020}, {0x0085, 0x0085}, {0x00A0, 0x00A0}, {0x1680, 0x1680},
      {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
  };
  return in_ranges(kWhitespace, c);
}

bool is_control(char32_t c) {
  if (c == U'\t' || c == U'\n' || c == U'\r') return false;
  // Categories Cc (controls), Cf (format characters) and Co (private use).
  static constexpr CodePointRange kControl[] = {
      {0x0000, 0x001F},   {0x007F, 0x009F},   {0x00AD, 0x00AD},   {0x0600, 0x0605},  {0x061C, 0x061C},
      {0x06DD, 0x06DD},   {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},  {0x180E, 0x180E},
      {0x200B, 0x200F},   {0x202A, 0x202E},   {0x2060, 0x2064},   {0x2066, 0x206F},  {0xE000, 0xF8FF},
      {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x13438},
      {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0xFFFFD},
      {0x100000, 0x10FFFD},
  };
  return in_ranges(kControl, c);
}

bool is_punctuation(char32_t c) {
  // BERT counts every non-alphanumeric printable ASCII character as punctuation, symbols too.
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  static constexpr CodePointRange kPunctuation[] = {
      // Latin-1: ¡ § « ¶ · » ¿
      {0x00A1, 0x00A1}, {0x00A7, 0x00A7}, {0x00AB, 0x00AB}, {0x00B6, 0x00B7}, {0x00BB, 0x00BB}, {0x00BF, 0x00BF},
      // Greek question mark and ano teleia; Armenian; Hebrew
      {0x037E, 0x037E}, {0x0387, 0x0387}, {0x055A, 0x055F}, {0x0589, 0x058A}, {0x05BE, 0x05BE}, {0x05C0, 0x05C0},
      {0x05C3, 0x05C3}, {0x05C6, 0x05C6}, {0x05F3, 0x05F4},
      // Arabic; Devanagari dandas; Thai
      {0x0609, 0x060A}, {0x060C, 0x060D}, {0x061B, 0x061B}, {0x061D, 0x061F}, {0x066A, 0x066D}, {0x06D4, 0x06D4},
      {0x0964, 0x0965}, {0x0970, 0x0970}, {0x0E4F, 0x0E4F}, {0x0E5A, 0x0E5B},
      // General Punctuation (dashes, quotes, bullets, ellipsis, per mille, primes, ...)
      {0x2010, 0x2027}, {0x2030, 0x2043}, {0x2045, 0x2051}, {0x2053, 0x205E},
      // Supplemental Punctuation
      {0x2E00, 0x2E2E}, {0x2E30, 0x2E4F}, {0x2E52, 0x2E5D},
      // CJK Symbols and Punctuation: 、。〃 brackets 〈〉《》「」『』【】〔〕 ... 〰 〽, katakana ゠ ・
      {0x3001, 0x3003}, {0x3008, 0x3011}, {0x3014, 0x301F}, {0x3030, 0x3030}, {0x303D, 0x303D}, {0x30A0, 0x30A0},
      {0x30FB, 0x30FB},
      // Vertical forms, CJK compatibility forms, small form variants
      {0xFE10, 0xFE19}, {0xFE30, 0xFE4F}, {0xFE50, 0xFE52}, {0xFE54, 0xFE61}, {0xFE63, 0xFE63}, {0xFE68, 0xFE68},
      {0xFE6A, 0xFE6B},
      // Fullwidth forms: ！＂＃ ％＆＇（）＊ ，－．／ ：； ？＠ ［＼］ ＿ ｛ ｝ ｟..･
      {0xFF01, 0xFF03}, {0xFF05, 0xFF0A}, {0xFF0C, 0xFF0F}, {0xFF1A, 0xFF1B}, {0xFF1F, 0xFF20}, {0xFF3B, 0xFF3D},
      {0xFF3F, 0xFF3F}, {0xFF5B, 0xFF5B}, {0xFF5D, 0xFF5D}, {0xFF5F, 0xFF65},
  };
  return in_ranges(kPunctuation, c);
}

bool is_cjk_ideograph(char32_t c) {
  static constexpr CodePointRange kIdeographs[] = {
      {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xF900, 0xFAFF},   {0x20000, 0x2A6DF},
      {0x2A700, 0x2B73F}, {0x2B740, 0x2B81F}, {0x2B820, 0x2CEAF}, {0x2F800, 0x2FA1F},
  };
  return in_ranges(kIdeographs, c);
}

bool is_combining_mark(char32_t c) {
  static constexpr CodePointRange kCombiningMarks[] = {
      {0x0300, 0x036F},  // Combining Diacritical Marks
      {0x0483, 0x0487},  // Cyrillic titlo and friends
      {0x0591, 0x05BD},  // Hebrew points
      {0x05BF, 0x05BF}, {0x05C1, 0x05C2}, {0x05C4, 0x05C5}, {0x05C7, 0x05C7},
      {0x064B, 0x065F},  // Arabic harakat
      {0x0670, 0x0670},
      {0x1AB0, 0x1AFF},  // Combining Diacritical Marks Extended
      {0x1DC0, 0x1DFF},  // Combining Diacritical Marks Supplement
      {0x20D0, 0x20FF},  // Combining Diacritical Marks for Symbols
      {0x302A, 0x302D},  // ideographic tone marks
      {0x3099, 0x309A},  // combining (han)dakuten
      {0xFE20, 0xFE2F},  // Combining Half Marks
  };
  return in_ranges(kCombiningMarks, c);
}

}  // namespace ember::text
