// Lower-casing: the case pairs of the Latin, Greek, Cyrillic and Armenian blocks, and Greek's
// final sigma.
#include <string>
#include <string_view>

#include "nn/text/unicode.h"

namespace ember::text {

namespace {

// Many blocks alternate capital and small letter: capital at even (or odd) code points, its
// small letter right after it.
bool is_even(char32_t c) { return c % 2 == 0; }

}  // namespace

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= U'A' && c <= U'Z') ? c + 32 : c;
  // Latin-1 and Latin Extended-A
  if (c >= 0x00C0 && c <= 0x00DE && c != 0x00D7) return c + 32;
  if (c >= 0x0100 && c <= 0x017F) {
    if (c == 0x0130) return U'i';  // İ: its small form is i plus a combining dot, which BERT drops anyway
    if (c == 0x0178) return 0x00FF;  // Ÿ
    if ((c <= 0x0137 || (c >= 0x014A && c <= 0x0177)) && c != 0x0131) return is_even(c) ? c + 1 : c;
    if ((c >= 0x0139 && c <= 0x0148) || (c >= 0x0179 && c <= 0x017E)) return is_even(c) ? c : c + 1;
    return c;
  }
  // Greek
  if (c >= 0x0370 && c <= 0x03FF) {
    if (c >= 0x0391 && c <= 0x03AB && c != 0x03A2) return c + 32;
    if (c == 0x0386) return 0x03AC;
    if (c >= 0x0388 && c <= 0x038A) return c + 37;
    if (c == 0x038C) return 0x03CC;
    if (c == 0x038E || c == 0x038F) return c + 63;
    if (c == 0x0370 || c == 0x0372 || c == 0x0376 || (c >= 0x03D8 && c <= 0x03EE)) return is_even(c) ? c + 1 : c;
    if (c == 0x037F) return 0x03F3;
    if (c == 0x03CF) return 0x03D7;
    if (c == 0x03F4) return 0x03B8;
    if (c == 0x03F7 || c == 0x03FA) return c + 1;
    if (c == 0x03F9) return 0x03F2;
    if (c >= 0x03FD) return c - 130;  // Ͻ Ͼ Ͽ -> ͻ ͼ ͽ
    return c;
  }
  // Cyrillic and Cyrillic Supplement
  if (c >= 0x0400 && c <= 0x052F) {
    if (c <= 0x040F) return c + 80;
    if (c <= 0x042F) return c + 32;
    if (c == 0x04C0) return 0x04CF;
    if ((c >= 0x0460 && c <= 0x0481) || (c >= 0x048A && c <= 0x04BF) || c >= 0x04D0) return is_even(c) ? c + 1 : c;
    if (c >= 0x04C1 && c <= 0x04CE) return is_even(c) ? c : c + 1;
    return c;
  }
  // Armenian
  if (c >= 0x0531 && c <= 0x0556) return c + 48;
  // Latin Extended Additional
  if (c >= 0x1E00 && c <= 0x1EFF) {
    if (c == 0x1E9E) return 0x00DF;  // capital sharp s
    if (c <= 0x1E95 || c >= 0x1EA0) return is_even(c) ? c + 1 : c;
    return c;
  }
  // Fullwidth Latin
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}

namespace {

// Letters that have a case, for the final-sigma rule: Latin, Greek, Cyrillic, Armenian.
bool is_cased_letter(char32_t c) {
  if (c < 0x80) return (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z');
  if (c >= 0x00C0 && c <= 0x024F) return c != 0x00D7 && c != 0x00F7;
  if (c >= 0x0370 && c <= 0x03FF) return c != 0x037E && c != 0x0387 && c != 0x0375 && c != 0x0384 && c != 0x0385;
  if (c >= 0x0400 && c <= 0x052F) return c < 0x0482 || c > 0x0489;
  if (c >= 0x0531 && c <= 0x0587) return c <= 0x0556 || c >= 0x0560;
  if (c >= 0x1E00 && c <= 0x1FFF) return true;
  return false;
}

// Characters the final-sigma rule looks through: combining marks and the in-word punctuation
// Unicode calls case-ignorable.
bool is_case_ignorable(char32_t c) {
  return is_combining_mark(c) || c == U'\'' || c == U'.' || c == U':' || c == 0x00B7 || c == 0x2019;
}

}  // namespace

std::u32string to_lower(std::u32string_view text) {
  constexpr char32_t kCapitalSigma = 0x03A3;
  constexpr char32_t kFinalSigma = 0x03C2;
  std::u32string out(text.size(), U'\0');
  for (size_t i = 0; i < text.size(); ++i) {
    out[i] = to_lower(text[i]);
    if (text[i] != kCapitalSigma) continue;
    // Σ closes a word when a cased letter comes before it and none comes after it.
    size_t before = i;
    while (before > 0 && is_case_ignorable(text[before - 1])) --before;
    size_t after = i + 1;
    while (after < text.size() && is_case_ignorable(text[after])) ++after;
    const bool letter_before = before > 0 && is_cased_letter(text[before - 1]);
    const bool letter_after = after < text.size() && is_cased_letter(text[after]);
    if (letter_before && !letter_after) out[i] = kFinalSigma;
  }
  return out;
}

std::string to_lower(std::string_view utf8) {
  if (!find_invalid_utf8(utf8)) return encode_utf8(to_lower(decode_utf8(utf8)));
  // Keep malformed bytes as they are: lower-casing must not change what it does not understand.
  std::string out;
  out.reserve(utf8.size());
  for (size_t offset = 0; offset < utf8.size();) {
    const DecodedCodePoint decoded = decode_utf8_at(utf8, offset);
    if (decoded.code_point == kReplacementCharacter && decoded.length == 1) {
      out.push_back(utf8[offset]);
    } else {
      append_utf8(out, to_lower(decoded.code_point));
    }
    offset += decoded.length;
  }
  return out;
}

}  // namespace ember::text
