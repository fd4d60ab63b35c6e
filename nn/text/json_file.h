// Internal to nn/text/: what tokenizer files share (type, version, special tokens) on top of the
// library's JSON reader, and their readable, atomic writing. No public header includes it
// (nlohmann-json is private to the library).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "nn/io/json_reader.h"
#include "nn/text/tokenizer.h"

namespace ember::text {

// The version every tokenizer file carries; a file of another version is refused.
inline constexpr int64_t kTokenizerFileVersion = 1;

// A tokenizer file: a JSON object read key by key (nn/io/json_reader.h), with the checks every
// tokenizer file shares.
class JsonFileReader : public JsonObjectReader {
 public:
  // Reads and parses `path`; `who` ("load_tokenizer", "WordTokenizer::load") starts every
  // message. A missing file, invalid JSON or a top level that is not an object throws.
  JsonFileReader(const std::string& path, const std::string& who);

  // Checks "type" == expected_type and "version" == kTokenizerFileVersion.
  void expect_type(const std::string& expected_type) const;
  // The "special_tokens" object: each of pad/unk/bos/eos/cls/sep/mask a string or absent.
  SpecialTokens special_tokens() const;
};

// The start of every tokenizer file: type, version and the special tokens. Callers add their
// own keys in the order they should appear.
nlohmann::ordered_json tokenizer_document(const std::string& type, const SpecialTokens& specials);

// Writes `document` to `path` atomically, one array element per line so that vocabularies read
// like lists. Strings must be valid UTF-8.
void write_json_file(const std::string& path, const nlohmann::ordered_json& document, const std::string& who);
// Writes `text` to `path` atomically (nn::write_file_atomically); `who` names the caller in the
// error. The directory must exist: a tokenizer is saved where its caller made room for it.
void write_text_file_atomically(const std::string& path, std::string_view text, const std::string& who);

}  // namespace ember::text
