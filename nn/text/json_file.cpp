// The checks tokenizer files share, and their atomic, readable writing.
#include "nn/text/json_file.h"

#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "nn/io/atomic_file.h"

namespace ember::text {

using nlohmann::json;
using nlohmann::ordered_json;

JsonFileReader::JsonFileReader(const std::string& path, const std::string& who)
    : JsonObjectReader(JsonObjectReader::read_file(path, who)) {}

void JsonFileReader::expect_type(const std::string& expected_type) const {
  const std::string type = string_at("type");
  if (type != expected_type) fail_at("type", fmt::format("is '{}', expected '{}'", type, expected_type));
  const int64_t version = integer_at("version");
  if (version != kTokenizerFileVersion) {
    fail_at("version", fmt::format("is {}; this ember reads version {}", version, kTokenizerFileVersion));
  }
}

SpecialTokens JsonFileReader::special_tokens() const {
  const JsonObjectReader names = object_at("special_tokens");
  SpecialTokens specials = SpecialTokens::none();
  const std::pair<const char*, std::string*> fields[] = {
      {"pad", &specials.pad}, {"unk", &specials.unk}, {"bos", &specials.bos},  {"eos", &specials.eos},
      {"cls", &specials.cls}, {"sep", &specials.sep}, {"mask", &specials.mask}};
  for (const auto& [name, field] : fields) {
    if (!names.has(name)) continue;
    const nlohmann::json& value = names.at(name);
    if (!value.is_string() || value.get<std::string>().empty()) names.fail_at(name, "should be a non-empty string");
    *field = value.get<std::string>();
  }
  return specials;
}

ordered_json tokenizer_document(const std::string& type, const SpecialTokens& specials) {
  ordered_json document;
  document["type"] = type;
  document["version"] = kTokenizerFileVersion;
  ordered_json names = ordered_json::object();
  const std::pair<const char*, const std::string*> fields[] = {
      {"pad", &specials.pad}, {"unk", &specials.unk}, {"bos", &specials.bos},  {"eos", &specials.eos},
      {"cls", &specials.cls}, {"sep", &specials.sep}, {"mask", &specials.mask}};
  for (const auto& [name, field] : fields) {
    if (!field->empty()) names[name] = *field;
  }
  document["special_tokens"] = names;
  return document;
}

namespace {

// Top-level keys one per line, and each array element on its own line: a 30,000-token
// vocabulary is then a list to read or diff, not one enormous line.
std::string format_document(const ordered_json& document) {
  std::string out = "{\n";
  size_t key_index = 0;
  for (const auto& [key, value] : document.items()) {
    out += "  " + ordered_json(key).dump() + ": ";
    if (value.is_array() && !value.empty()) {
      out += "[\n";
      for (size_t i = 0; i < value.size(); ++i) {
        out += "    " + value[i].dump();
        out += i + 1 < value.size() ? ",\n" : "\n";
      }
      out += "  ]";
    } else {
      out += value.dump();
    }
    out += ++key_index < document.size() ? ",\n" : "\n";
  }
  out += "}\n";
  return out;
}

}  // namespace

void write_json_file(const std::string& path, const ordered_json& document, const std::string& who) {
  std::string text;
  try {
    text = format_document(document);
  } catch (const json::exception& error) {
    fail("{}: cannot write '{}': a token is not valid UTF-8 ({})", who, path, error.what());
  }
  write_text_file_atomically(path, text, who);
}

void write_text_file_atomically(const std::string& path, std::string_view text, const std::string& who) {
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!directory.empty() && !std::filesystem::is_directory(directory, error)) {
    fail("{}: cannot write '{}': the directory '{}' does not exist", who, path, directory.string());
  }
  try {
    nn::write_file_atomically(path, text);
  } catch (const Error& write_error) {
    fail("{}: {}", who, write_error.what());
  }
}

}  // namespace ember::text
