// UTF-8 decoding and encoding, BERT's character classes, lower-casing and accent stripping.
// The tables cover the scripts ember's data sets and BERT's vocabulary meet most; they were
// checked against the Unicode character database.
#include "nn/text/unicode.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <unordered_map>

#include "core/error.h"

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

bool is_continuation_byte(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

// --- UTF-8 -----------------------------------------------------------------------------------

DecodedCodePoint decode_utf8_at(std::string_view text, size_t offset) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[offset + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};

  size_t length = 0;
  char32_t code_point = 0;
  char32_t smallest = 0;  // below this the sequence is an overlong encoding
  if ((lead & 0xE0) == 0xC0) {
    length = 2, code_point = lead & 0x1F, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code_point = lead & 0x0F, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code_point = lead & 0x07, smallest = 0x10000;
  } else {
    return {kReplacementCharacter, 1};  // a continuation byte or 0xF8..0xFF cannot start a sequence
  }
  if (offset + length > text.size()) return {kReplacementCharacter, 1};
  for (size_t i = 1; i < length; ++i) {
    if (!is_continuation_byte(byte(i))) return {kReplacementCharacter, 1};
    code_point = (code_point << 6) | (byte(i) & 0x3F);
  }
  const bool surrogate = code_point >= 0xD800 && code_point <= 0xDFFF;
  if (code_point < smallest || surrogate || code_point > 0x10FFFF) return {kReplacementCharacter, 1};
  return {code_point, length};
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const DecodedCodePoint decoded = decode_utf8_at(text, offset);
    out.push_back(decoded.code_point);
    offset += decoded.length;
  }
  return out;
}

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  for (size_t offset = 0; offset < text.size();) {
    const DecodedCodePoint decoded = decode_utf8_at(text, offset);
    // A genuine U+FFFD in the text takes three bytes; a malformed byte decodes to it with length 1.
    if (decoded.code_point == kReplacementCharacter && decoded.length == 1) return offset;
    offset += decoded.length;
  }
  return std::nullopt;
}

std::string to_valid_utf8(std::string_view text) {
  if (!find_invalid_utf8(text)) return std::string(text);
  return encode_utf8(decode_utf8(text));
}

void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    EMBER_CHECK(code_point < 0xD800 || code_point > 0xDFFF, "encode_utf8: {} is a surrogate, not a character",
                code_point_name(code_point));
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    EMBER_CHECK(code_point <= 0x10FFFF, "encode_utf8: {} is beyond U+10FFFF", code_point_name(code_point));
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

std::string encode_utf8(char32_t code_point) {
  std::string out;
  append_utf8(out, code_point);
  return out;
}

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) append_utf8(out, c);
  return out;
}

std::string code_point_name(char32_t code_point) {
  return fmt::format("U+{:04X}", static_cast<uint32_t>(code_point));
}

// --- character classes -----------------------------------------------------------------------

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

// --- case --------------------------------------------------------------------------------------

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

// --- accents -----------------------------------------------------------------------------------

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

namespace {

// Each base character and the precomposed characters whose canonical decomposition is that
// character followed only by combining marks (a few Greek ones decompose to a lone symbol:
// U+0387 ano teleia is canonically U+00B7 middle dot).
struct AccentedLetters {
  char32_t base;
  std::u32string_view variants;
};

constexpr AccentedLetters kAccentedLetters[] = {
    {U';', U";"},
    {U'A', U"ÀÁÂÃÄÅĀĂĄǍǞǠǺȀȂȦḀẠẢẤẦẨẪẬẮẰẲẴẶ"},
    {U'B', U"ḂḄḆ"},
    {U'C', U"ÇĆĈĊČḈ"},
    {U'D', U"ĎḊḌḎḐḒ"},
    {U'E', U"ÈÉÊËĒĔĖĘĚȄȆȨḔḖḘḚḜẸẺẼẾỀỂỄỆ"},
    {U'F', U"Ḟ"},
    {U'G', U"ĜĞĠĢǦǴḠ"},
    {U'H', U"ĤȞḢḤḦḨḪ"},
    {U'I', U"ÌÍÎÏĨĪĬĮİǏȈȊḬḮỈỊ"},
    {U'J', U"Ĵ"},
    {U'K', U"ĶǨḰḲḴ"},
    {U'L', U"ĹĻĽḶḸḺḼ"},
    {U'M', U"ḾṀṂ"},
    {U'N', U"ÑŃŅŇǸṄṆṈṊ"},
    {U'O', U"ÒÓÔÕÖŌŎŐƠǑǪǬȌȎȪȬȮȰṌṎṐṒỌỎỐỒỔỖỘỚỜỞỠỢ"},
    {U'P', U"ṔṖ"},
    {U'R', U"ŔŖŘȐȒṘṚṜṞ"},
    {U'S', U"ŚŜŞŠȘṠṢṤṦṨ"},
    {U'T', U"ŢŤȚṪṬṮṰ"},
    {U'U', U"ÙÚÛÜŨŪŬŮŰŲƯǓǕǗǙǛȔȖṲṴṶṸṺỤỦỨỪỬỮỰ"},
    {U'V', U"ṼṾ"},
    {U'W', U"ŴẀẂẄẆẈ"},
    {U'X', U"ẊẌ"},
    {U'Y', U"ÝŶŸȲẎỲỴỶỸ"},
    {U'Z', U"ŹŻŽẐẒẔ"},
    {U'`', U"`"},
    {U'a', U"àáâãäåāăąǎǟǡǻȁȃȧḁạảấầẩẫậắằẳẵặ"},
    {U'b', U"ḃḅḇ"},
    {U'c', U"çćĉċčḉ"},
    {U'd', U"ďḋḍḏḑḓ"},
    {U'e', U"èéêëēĕėęěȅȇȩḕḗḙḛḝẹẻẽếềểễệ"},
    {U'f', U"ḟ"},
    {U'g', U"ĝğġģǧǵḡ"},
    {U'h', U"ĥȟḣḥḧḩḫẖ"},
    {U'i', U"ìíîïĩīĭįǐȉȋḭḯỉị"},
    {U'j', U"ĵǰ"},
    {U'k', U"ķǩḱḳḵ"},
    {U'l', U"ĺļľḷḹḻḽ"},
    {U'm', U"ḿṁṃ"},
    {U'n', U"ñńņňǹṅṇṉṋ"},
    {U'o', U"òóôõöōŏőơǒǫǭȍȏȫȭȯȱṍṏṑṓọỏốồổỗộớờởỡợ"},
    {U'p', U"ṕṗ"},
    {U'r', U"ŕŗřȑȓṙṛṝṟ"},
    {U's', U"śŝşšșṡṣṥṧṩ"},
    {U't', U"ţťțṫṭṯṱẗ"},
    {U'u', U"ùúûüũūŭůűųưǔǖǘǚǜȕȗṳṵṷṹṻụủứừửữự"},
    {U'v', U"ṽṿ"},
    {U'w', U"ŵẁẃẅẇẉẘ"},
    {U'x', U"ẋẍ"},
    {U'y', U"ýÿŷȳẏẙỳỵỷỹ"},
    {U'z', U"źżžẑẓẕ"},
    {U'¨', U"΅῁῭΅"},
    {U'´', U"´"},
    {U'·', U"·"},
    {U'Æ', U"ǢǼ"},
    {U'Ø', U"Ǿ"},
    {U'æ', U"ǣǽ"},
    {U'ø', U"ǿ"},
    {U'ſ', U"ẛ"},
    {U'Ʒ', U"Ǯ"},
    {U'ʒ', U"ǯ"},
    {U'ʹ', U"ʹ"},
    {U'Α', U"ΆἈἉἊἋἌἍἎἏᾈᾉᾊᾋᾌᾍᾎᾏᾸᾹᾺΆᾼ"},
    {U'Ε', U"ΈἘἙἚἛἜἝῈΈ"},
    {U'Η', U"ΉἨἩἪἫἬἭἮἯᾘᾙᾚᾛᾜᾝᾞᾟῊΉῌ"},
    {U'Ι', U"ΊΪἸἹἺἻἼἽἾἿῘῙῚΊ"},
    {U'Ο', U"ΌὈὉὊὋὌὍῸΌ"},
    {U'Ρ', U"Ῥ"},
    {U'Υ', U"ΎΫὙὛὝὟῨῩῪΎ"},
    {U'Ω', U"ΏὨὩὪὫὬὭὮὯᾨᾩᾪᾫᾬᾭᾮᾯῺΏῼ"},
    {U'α', U"άἀἁἂἃἄἅἆἇὰάᾀᾁᾂᾃᾄᾅᾆᾇᾰᾱᾲᾳᾴᾶᾷ"},
    {U'ε', U"έἐἑἒἓἔἕὲέ"},
    {U'η', U"ήἠἡἢἣἤἥἦἧὴήᾐᾑᾒᾓᾔᾕᾖᾗῂῃῄῆῇ"},
    {U'ι', U"ΐίϊἰἱἲἳἴἵἶἷὶίιῐῑῒΐῖῗ"},
    {U'ο', U"όὀὁὂὃὄὅὸό"},
    {U'ρ', U"ῤῥ"},
    {U'υ', U"ΰϋύὐὑὒὓὔὕὖὗὺύῠῡῢΰῦῧ"},
    {U'ω', U"ώὠὡὢὣὤὥὦὧὼώᾠᾡᾢᾣᾤᾥᾦᾧῲῳῴῶῷ"},
    {U'ϒ', U"ϓϔ"},
    {U'І', U"Ї"},
    {U'А', U"ӐӒ"},
    {U'Г', U"Ѓ"},
    {U'Е', U"ЀЁӖ"},
    {U'Ж', U"ӁӜ"},
    {U'З', U"Ӟ"},
    {U'И', U"ЍЙӢӤ"},
    {U'К', U"Ќ"},
    {U'О', U"Ӧ"},
    {U'У', U"ЎӮӰӲ"},
    {U'Ч', U"Ӵ"},
    {U'Ы', U"Ӹ"},
    {U'Э', U"Ӭ"},
    {U'а', U"ӑӓ"},
    {U'г', U"ѓ"},
    {U'е', U"ѐёӗ"},
    {U'ж', U"ӂӝ"},
    {U'з', U"ӟ"},
    {U'и', U"йѝӣӥ"},
    {U'к', U"ќ"},
    {U'о', U"ӧ"},
    {U'у', U"ўӯӱӳ"},
    {U'ч', U"ӵ"},
    {U'ы', U"ӹ"},
    {U'э', U"ӭ"},
    {U'і', U"ї"},
    {U'Ѵ', U"Ѷ"},
    {U'ѵ', U"ѷ"},
    {U'Ә', U"Ӛ"},
    {U'ә', U"ӛ"},
    {U'Ө', U"Ӫ"},
    {U'ө', U"ӫ"},
    {U'᾿', U"῍῎῏"},
    {U'῾', U"῝῞῟"},
    {U'う', U"ゔ"},
    {U'か', U"が"},
    {U'き', U"ぎ"},
    {U'く', U"ぐ"},
    {U'け', U"げ"},
    {U'こ', U"ご"},
    {U'さ', U"ざ"},
    {U'し', U"じ"},
    {U'す', U"ず"},
    {U'せ', U"ぜ"},
    {U'そ', U"ぞ"},
    {U'た', U"だ"},
    {U'ち', U"ぢ"},
    {U'つ', U"づ"},
    {U'て', U"で"},
    {U'と', U"ど"},
    {U'は', U"ばぱ"},
    {U'ひ', U"びぴ"},
    {U'ふ', U"ぶぷ"},
    {U'へ', U"べぺ"},
    {U'ほ', U"ぼぽ"},
    {U'ゝ', U"ゞ"},
    {U'ウ', U"ヴ"},
    {U'カ', U"ガ"},
    {U'キ', U"ギ"},
    {U'ク', U"グ"},
    {U'ケ', U"ゲ"},
    {U'コ', U"ゴ"},
    {U'サ', U"ザ"},
    {U'シ', U"ジ"},
    {U'ス', U"ズ"},
    {U'セ', U"ゼ"},
    {U'ソ', U"ゾ"},
    {U'タ', U"ダ"},
    {U'チ', U"ヂ"},
    {U'ツ', U"ヅ"},
    {U'テ', U"デ"},
    {U'ト', U"ド"},
    {U'ハ', U"バパ"},
    {U'ヒ', U"ビピ"},
    {U'フ', U"ブプ"},
    {U'ヘ', U"ベペ"},
    {U'ホ', U"ボポ"},
    {U'ワ', U"ヷ"},
    {U'ヰ', U"ヸ"},
    {U'ヱ', U"ヹ"},
    {U'ヲ', U"ヺ"},
    {U'ヽ', U"ヾ"},
};

const std::unordered_map<char32_t, char32_t>& base_letters() {
  static const std::unordered_map<char32_t, char32_t> table = [] {
    std::unordered_map<char32_t, char32_t> base_of;
    for (const AccentedLetters& letters : kAccentedLetters) {
      for (char32_t variant : letters.variants) base_of.emplace(variant, letters.base);
    }
    return base_of;
  }();
  return table;
}

}  // namespace

std::u32string strip_accents(std::u32string_view text) {
  const auto& base_of = base_letters();
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (is_combining_mark(c)) continue;
    if (c < 0xC0) {
      out.push_back(c);
      continue;
    }
    // A Hangul syllable's canonical decomposition is its two or three jamo (leading consonant,
    // vowel, optional trailing consonant), computed from its position in the syllable block.
    constexpr char32_t kFirstSyllable = 0xAC00, kLastSyllable = 0xD7A3;
    if (c >= kFirstSyllable && c <= kLastSyllable) {
      constexpr char32_t kVowels = 21, kTrailing = 28;
      const char32_t index = c - kFirstSyllable;
      out.push_back(0x1100 + index / (kVowels * kTrailing));
      out.push_back(0x1161 + (index % (kVowels * kTrailing)) / kTrailing);
      if (index % kTrailing != 0) out.push_back(0x11A7 + index % kTrailing);
      continue;
    }
    const auto found = base_of.find(c);
    out.push_back(found == base_of.end() ? c : found->second);
  }
  return out;
}

}  // namespace ember::text
