// nn/text/unicode.h and nn/text/words.h: UTF-8 decoding of good and malformed bytes, BERT's character
// classes, lower-casing, accent stripping, and splitting text into words and back.
#include <doctest/doctest.h>

#include "core/error.h"
#include "helpers.h"
#include "nn/text/unicode.h"
#include "nn/text/words.h"

using namespace ember;
using namespace ember::text;
using Words = std::vector<std::string>;

namespace {

std::string lower_and_strip(const std::string& text) {
  return encode_utf8(strip_accents(to_lower(std::u32string_view(decode_utf8(text)))));
}

}  // namespace

TEST_CASE("UTF-8 decodes one to four bytes and encodes back") {
  const std::string text = "a\u00E9\u20AC\U0001F600";  // a é € 😀
  CHECK(decode_utf8(text) == U"a\u00E9\u20AC\U0001F600");
  CHECK(encode_utf8(decode_utf8(text)) == text);
  CHECK(decode_utf8_at(text, 1).length == 2);
  CHECK(decode_utf8_at(text, 3).length == 3);
  CHECK(decode_utf8_at(text, 6).length == 4);
  CHECK_THROWS_WITH_ALL(decode_utf8_at(text, text.size()), "decode_utf8_at: offset 10 is past the end of a 10-byte");
  CHECK_THROWS_WITH_ALL(decode_utf8_at(std::string_view(), 0), "past the end");
  CHECK(encode_utf8(U'\u00E9') == "\xC3\xA9");
  CHECK(find_invalid_utf8(text) == std::nullopt);
  CHECK(decode_utf8("").empty());
  CHECK(code_point_name(U'\u00E9') == "U+00E9");
}

TEST_CASE("malformed UTF-8 becomes one U+FFFD per byte and is located") {
  // A stray continuation byte, a truncated sequence, an overlong '/', an encoded surrogate, a
  // value above U+10FFFF, and a lead byte that cannot start anything.
  CHECK(decode_utf8("a\x80z") == U"a\uFFFDz");
  CHECK(decode_utf8("\xE2\x82") == U"\uFFFD\uFFFD");
  CHECK(decode_utf8("\xC0\xAF") == U"\uFFFD\uFFFD");
  CHECK(decode_utf8("\xED\xA0\x80") == U"\uFFFD\uFFFD\uFFFD");
  CHECK(decode_utf8("\xF4\x90\x80\x80") == U"\uFFFD\uFFFD\uFFFD\uFFFD");
  CHECK(decode_utf8("\xFF") == U"\uFFFD");
  CHECK(find_invalid_utf8("ok \xE2\x82") == 3);
  // A genuine U+FFFD is valid text.
  CHECK(find_invalid_utf8("\uFFFD") == std::nullopt);
  CHECK(to_valid_utf8("a\xFF"
                      "b") ==
        "a\uFFFD"
        "b");
}

TEST_CASE("encoding a surrogate or a value beyond U+10FFFF throws") {
  CHECK_THROWS_WITH_ALL(encode_utf8(char32_t{0xD800}), "U+D800", "surrogate");
  CHECK_THROWS_WITH_ALL(encode_utf8(char32_t{0x110000}), "U+110000");
}

TEST_CASE("character classes follow BERT") {
  for (char32_t c : std::u32string_view(U" \t\n\r\u00A0\u2003\u3000")) CHECK(is_whitespace(c));
  CHECK_FALSE(is_whitespace(U'a'));
  CHECK_FALSE(is_whitespace(U'\u200B'));  // zero-width space is a format character

  for (char32_t c : std::u32string_view(U"\x01\x7F\u00AD\u200B\u200D\uFEFF\uE000")) CHECK(is_control(c));
  for (char32_t c : std::u32string_view(U"\t\n\r a")) CHECK_FALSE(is_control(c));

  // Every non-alphanumeric printable ASCII character, symbols included, as BERT has it.
  for (char32_t c : std::u32string_view(U"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")) CHECK(is_punctuation(c));
  for (char32_t c : std::u32string_view(U"\u00A1\u00BF\u00AB\u2014\u201C\u2026\u3001\u3002\u300C\uFF01\uFF1F"))
    CHECK(is_punctuation(c));
  for (char32_t c : std::u32string_view(U"aZ09 \u00E9\u00A9\u00D7\u20AC"))
    CHECK_FALSE(is_punctuation(c));  // © × € are symbols

  for (char32_t c : std::u32string_view(U"\u4E00\u6771\u4EAC\u9FFF\u3400\U00020000\uF900")) CHECK(is_cjk_ideograph(c));
  for (char32_t c : std::u32string_view(U"a\u3042\u30A2\uAC00"))
    CHECK_FALSE(is_cjk_ideograph(c));  // kana and Hangul are not
}

TEST_CASE("lower-casing covers Latin, Greek and Cyrillic") {
  CHECK(to_lower("ABC xyz") == "abc xyz");
  CHECK(to_lower("\u00C9COLE \u00D8RE \u0152UVRE \u0141\u00D3D\u0179") ==
        "\u00E9cole \u00F8re \u0153uvre \u0142\u00F3d\u017A");
  CHECK(to_lower("\u0178") == "\u00FF");                                                  // Ÿ -> ÿ
  CHECK(to_lower("\u0391\u0398\u0397\u039D\u0391") == "\u03B1\u03B8\u03B7\u03BD\u03B1");  // ΑΘΗΝΑ
  CHECK(to_lower("\u041C\u041E\u0421\u041A\u0412\u0410 \u0401\u0416") ==
        "\u043C\u043E\u0441\u043A\u0432\u0430 \u0451\u0436");
  // Σ at the end of a word is the final sigma ς, elsewhere σ.
  CHECK(to_lower("\u039F\u0394\u039F\u03A3") == "\u03BF\u03B4\u03BF\u03C2");
  CHECK(to_lower("\u03A3\u039F\u03A6\u039F\u03A3.") == "\u03C3\u03BF\u03C6\u03BF\u03C2.");
  CHECK(to_lower("\u03A3") == "\u03C3");
  // Malformed bytes pass through untouched.
  CHECK(to_lower("A\xFF"
                 "B") ==
        "a\xFF"
        "b");
}

TEST_CASE("accent stripping leaves the base letters") {
  CHECK(lower_and_strip("Caf\u00E9 \u0178 \u00D1and\u00FA") == "cafe y nandu");
  CHECK(lower_and_strip("na\u00EFve r\u00E9sum\u00E9 \u00C5ngstr\u00F6m") == "naive resume angstrom");
  CHECK(lower_and_strip("Vi\u1EC7t Nam") == "viet nam");                                         // Việt
  CHECK(lower_and_strip("e\u0301") == "e");                                                      // decomposed é
  CHECK(lower_and_strip("\u0386\u03B8\u03AE\u03BD\u03B1") == "\u03B1\u03B8\u03B7\u03BD\u03B1");  // Αθήνα
  CHECK(lower_and_strip("\u0419") == "\u0438");              // Й -> и, as BERT uncased
  CHECK(lower_and_strip("\u304C") == "\u304B");              // が -> か
  CHECK(lower_and_strip("\uD55C") == "\u1112\u1161\u11AB");  // 한 -> its jamo
  // Letters without a decomposition keep their shape.
  CHECK(lower_and_strip("\u00D8 \u0141 \u00C6 \u00DF") == "\u00F8 \u0142 \u00E6 \u00DF");
  CHECK(strip_accents(U"\u00C9") == U"E");
}

TEST_CASE("split_words separates punctuation, CJK ideographs and whitespace, and drops controls") {
  CHECK(split_words("Don't panic!") == Words{"Don", "'", "t", "panic", "!"});
  CHECK(split_words("  a\tb\n\u00A0c  ") == Words{"a", "b", "c"});
  CHECK(split_words("\u6771\u4EAC\u306F") == Words{"\u6771", "\u4EAC", "\u306F"});  // 東 京 は (kana stays)
  CHECK(split_words("ab\x01\u200B"
                    "cd") == Words{"abcd"});
  CHECK(split_words("...") == Words{".", ".", "."});
  CHECK(split_words("").empty());
  CHECK(split_words(" \t\n").empty());
  CHECK(split_words("\xFF") == Words{"\uFFFD"});
}

TEST_CASE("join_words attaches punctuation the way English is written") {
  CHECK(join_words({"hello", ",", "world", "!"}) == "hello, world!");
  CHECK(join_words({"don", "'", "t", "stop", "(", "now", ")", "."}) == "don't stop (now).");
  CHECK(join_words({"a", "well", "-", "known", "fact"}) == "a well-known fact");
  CHECK(join_words({"the", "'", "quoted", "'", "word"}) == "the ' quoted ' word");
  CHECK(join_words({}) == "");
  CHECK(join_words({"!"}) == "!");
}
