// Internal to nn/text/: reading and writing the tokenizers' JSON files with errors that name the
// file and the key. No public header includes it (nlohmann-json is private to the library).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "nn/text/tokenizer.h"

namespace ember::text {

// The version every tokenizer file carries; a file of another version is refused.
inline constexpr int64_t kTokenizerFileVersion = 1;

// Reads and parses any JSON file; a missing file or invalid JSON throws "<who>: ..." naming it.
nlohmann::json parse_json_file(const std::string& path, const std::string& who);

// A parsed tokenizer file and the accessors that check each key.
class JsonFileReader {
 public:
  // Reads and parses `path`; `who` ("load_tokenizer", "WordTokenizer::load") starts every
  // message. A missing file, invalid JSON or a top level that is not an object throws.
  JsonFileReader(std::string path, std::string who);

  const std::string& path() const { return path_; }
  const nlohmann::json& document() const { return document_; }
  bool has(const std::string& key) const { return document_.contains(key); }

  // The top-level value of `key`, which must exist and be of the named kind.
  std::string string_at(const std::string& key) const;
  int64_t integer_at(const std::string& key) const;
  bool boolean_at(const std::string& key) const;
  std::vector<std::string> strings_at(const std::string& key) const;
  const nlohmann::json& array_at(const std::string& key) const;

  // Checks "type" == expected_type and "version" == kTokenizerFileVersion.
  void expect_type(const std::string& expected_type) const;
  // The "special_tokens" object: each of pad/unk/bos/eos/cls/sep/mask a string or absent.
  SpecialTokens special_tokens() const;

  // Throws "<who>: '<path>': key '<key>' <problem>".
  [[noreturn]] void fail_at(const std::string& key, const std::string& problem) const;

 private:
  const nlohmann::json& member(const std::string& key) const;
  std::string path_;
  std::string who_;
  nlohmann::json document_;
};

// The start of every tokenizer file: type, version and the special tokens. Callers add their
// own keys in the order they should appear.
nlohmann::ordered_json tokenizer_document(const std::string& type, const SpecialTokens& specials);

// Writes `document` to `path` atomically, one array element per line so that vocabularies read
// like lists. Strings must be valid UTF-8.
void write_json_file(const std::string& path, const nlohmann::ordered_json& document, const std::string& who);
// Writes `text` to `path` atomically (a temporary file beside it, renamed over it); `who` names
// the caller in the error.
void write_text_file_atomically(const std::string& path, std::string_view text, const std::string& who);

}  // namespace ember::text
