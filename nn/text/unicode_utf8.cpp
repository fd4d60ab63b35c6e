// UTF-8 decoding and encoding: malformed bytes become U+FFFD, one per byte, and encoding refuses
// what is not a Unicode scalar value.
#include <fmt/format.h>

#include "core/error.h"
#include "nn/text/unicode.h"

namespace ember::text {

namespace {

bool is_continuation_byte(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

DecodedCodePoint decode_utf8_at(std::string_view text, size_t offset) {
  EMBER_CHECK(offset < text.size(), "decode_utf8_at: offset {} is past the end of a {}-byte string", offset,
              text.size());
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

}  // namespace ember::text
