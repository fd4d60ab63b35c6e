// Reading tokenizer files with key-by-key checks, and writing them atomically and readably.
#include "nn/text/json_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "nn/io/json_nesting.h"
#include "nn/io/regular_file.h"

namespace ember::text {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string os_error(int error) { return std::error_code(error, std::generic_category()).message(); }

const char* kind_of(const json& value) { return value.type_name(); }

}  // namespace

json parse_json_file(const std::string& path, const std::string& who) {
  check_regular_file(path, who);
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("{}: cannot open '{}': {}", who, path, os_error(errno));
  std::stringstream contents;
  contents << file.rdbuf();
  try {
    return parse_json_nested_at_most(contents.str(), [&] {
      fail("{}: '{}' is nested deeper than {} levels, which no tokenizer file is", who, path, kMaxJsonNesting);
    });
  } catch (const json::exception& error) {
    // Not only parse_error: a number beyond double's range (1e999) is an out_of_range error.
    fail("{}: '{}' is not valid JSON ({})", who, path, error.what());
  }
}

JsonFileReader::JsonFileReader(std::string path, std::string who)
    : path_(std::move(path)), who_(std::move(who)), document_(parse_json_file(path_, who_)) {
  if (!document_.is_object()) {
    fail("{}: '{}' is not a tokenizer file: its top level is a JSON {}, not an object", who_, path_,
         kind_of(document_));
  }
}

void JsonFileReader::fail_at(const std::string& key, const std::string& problem) const {
  fail("{}: '{}': key '{}' {}", who_, path_, key, problem);
}

const json& JsonFileReader::member(const std::string& key) const {
  if (!document_.contains(key)) fail_at(key, "is missing");
  return document_.at(key);
}

std::string JsonFileReader::string_at(const std::string& key) const {
  const json& value = member(key);
  if (!value.is_string()) fail_at(key, fmt::format("should be a string, not a {}", kind_of(value)));
  return value.get<std::string>();
}

int64_t JsonFileReader::integer_at(const std::string& key) const {
  const json& value = member(key);
  if (!value.is_number_integer()) fail_at(key, fmt::format("should be an integer, not a {}", kind_of(value)));
  return value.get<int64_t>();
}

bool JsonFileReader::boolean_at(const std::string& key) const {
  const json& value = member(key);
  if (!value.is_boolean()) fail_at(key, fmt::format("should be true or false, not a {}", kind_of(value)));
  return value.get<bool>();
}

const json& JsonFileReader::array_at(const std::string& key) const {
  const json& value = member(key);
  if (!value.is_array()) fail_at(key, fmt::format("should be an array, not a {}", kind_of(value)));
  return value;
}

std::vector<std::string> JsonFileReader::strings_at(const std::string& key) const {
  const json& array = array_at(key);
  std::vector<std::string> strings;
  strings.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    if (!array[i].is_string()) {
      fail_at(key, fmt::format("should hold strings, but element {} is a {}", i, kind_of(array[i])));
    }
    strings.push_back(array[i].get<std::string>());
  }
  return strings;
}

void JsonFileReader::expect_type(const std::string& expected_type) const {
  const std::string type = string_at("type");
  if (type != expected_type) fail_at("type", fmt::format("is '{}', expected '{}'", type, expected_type));
  const int64_t version = integer_at("version");
  if (version != kTokenizerFileVersion) {
    fail_at("version", fmt::format("is {}; this ember reads version {}", version, kTokenizerFileVersion));
  }
}

SpecialTokens JsonFileReader::special_tokens() const {
  const json& object = member("special_tokens");
  if (!object.is_object()) fail_at("special_tokens", fmt::format("should be an object, not a {}", kind_of(object)));
  SpecialTokens specials = SpecialTokens::none();
  const std::pair<const char*, std::string*> fields[] = {
      {"pad", &specials.pad}, {"unk", &specials.unk}, {"bos", &specials.bos},  {"eos", &specials.eos},
      {"cls", &specials.cls}, {"sep", &specials.sep}, {"mask", &specials.mask}};
  for (const auto& [name, field] : fields) {
    if (!object.contains(name)) continue;
    const json& value = object.at(name);
    if (!value.is_string() || value.get<std::string>().empty()) {
      fail_at(fmt::format("special_tokens.{}", name), "should be a non-empty string");
    }
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

// In the target's directory, so the final rename stays on one file system and is atomic.
std::string temporary_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter.fetch_add(1));
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
  const std::string temporary = temporary_path_for(path);
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) fail("{}: cannot create '{}' to write '{}': {}", who, temporary, path, os_error(errno));
    file.write(text.data(), static_cast<std::streamsize>(text.size()));
    file.close();
    if (!file) {
      std::remove(temporary.c_str());
      fail("{}: writing '{}' failed", who, temporary);
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    fail("{}: cannot replace '{}': {}", who, path, os_error(error));
  }
}

}  // namespace ember::text
