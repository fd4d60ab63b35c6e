// Finding and reading the raw data files of ember's examples, and checking their encoding.
#include "nn/data/data_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace ember::datasets {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_missing(const std::string& function, const std::string& path, const std::string& set) {
  fail("{}: {} not found; run: bash scripts/fetch_data.sh {}", function, path, set);
}

}  // namespace

std::string data_path(const std::string& data_dir, const std::string& set, const std::string& file) {
  const std::string path = (fs::path(data_dir) / file).string();
  std::error_code error;
  if (!fs::exists(path, error)) fail_missing("data_path", path, set);
  EMBER_CHECK(fs::is_regular_file(path, error),
              "data_path: {} is not a regular file; run: bash scripts/fetch_data.sh {}", path, set);
  return path;
}

std::string read_data_file(const std::string& path, const std::string& set, const std::string& reader) {
  std::error_code error;
  if (!fs::exists(path, error)) fail_missing(reader, path, set);
  EMBER_CHECK(fs::is_regular_file(path, error), "{}: {} is not a regular file", reader, path);
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.is_open(), "{}: cannot open {}", reader, path);
  // One read of the whole file: the largest data set is 25 MB and a single copy is the
  // fastest way to get it into memory.
  const auto size = fs::file_size(path, error);
  EMBER_CHECK(!error, "{}: cannot read the size of {}: {}", reader, path, error.message());
  std::string content(size, '\0');
  in.read(content.data(), static_cast<std::streamsize>(size));
  EMBER_CHECK(static_cast<uintmax_t>(in.gcount()) == size, "{}: cannot read {} ({} of {} bytes read)", reader, path,
              in.gcount(), size);
  return content;
}

int64_t line_of_offset(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

namespace {

// The length of the UTF-8 sequence starting at text[i], or 0 if it is not a valid one.
size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length;
  uint32_t code_point;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    code_point = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    code_point = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    code_point = lead & 0x07;
  } else {
    return 0;  // a continuation byte or 0xF8..0xFF where a character should start
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code_point < smallest[length]) return 0;                     // overlong form
  if (code_point >= 0xD800 && code_point <= 0xDFFF) return 0;      // UTF-16 surrogate
  if (code_point > 0x10FFFF) return 0;
  return length;
}

}  // namespace

void check_utf8(std::string_view text, const std::string& path, const std::string& reader) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII runs dominate every data set: skip them a byte at a time without decoding.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      const size_t newline = text.rfind('\n', i);  // text[i] itself is not a newline
      const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
      fail("{}: {}: line {}: invalid UTF-8 at byte {} of the line", reader, path, line_of_offset(text, i),
           i - line_start + 1);
    }
    i += length;
  }
}

int64_t count_code_points(std::string_view text) {
  // Every code point has exactly one byte that is not a continuation byte (10xxxxxx).
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

}  // namespace ember::datasets
