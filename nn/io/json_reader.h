// Internal to the library (nlohmann-json is private to it: no public header includes this one):
// how ember reads every JSON file a user hands it. Parsing with a bound on nesting, and a checked
// conversion of each value whose errors name the reader, the file and the key.
//
//   const JsonObjectReader config = JsonObjectReader::read_file(path, "BertConfig");
//   const int64_t layers = config.integer_at("num_hidden_layers");
//   // BertConfig: 'config.json': key 'num_hidden_layers' should be an integer, not 1.5
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// nlohmann-json parses any depth, but writing a value back (dump, as error messages do) recurses
// once per level, so a file of a hundred thousand '[' would overflow the stack. No file ember
// reads nests deeper than a few levels.
inline constexpr int kMaxJsonNesting = 64;

// json::parse(text), calling `refuse()`, which must throw, as soon as the nesting passes
// kMaxJsonNesting. Other problems throw nlohmann-json's exceptions, as json::parse does. For a
// reader with errors of its own (safetensors calls a bad header a corrupt file); the others use
// parse_json below.
template <class Refuse>
nlohmann::json parse_json_nested_at_most(std::string_view text, Refuse&& refuse) {
  return nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonNesting) refuse();
    return true;
  });
}

// `text`, the contents of `path`, parsed. Invalid JSON, a number beyond double's range (1e999)
// and nesting deeper than kMaxJsonNesting throw ember::Error "<who>: '<path>' ...".
nlohmann::json parse_json(std::string_view text, const std::string& path, const std::string& who);

// The file at `path`, parsed as parse_json does. What is not a regular file (nn/io/regular_file.h)
// and a file that cannot be opened throw too.
nlohmann::json read_json_file(const std::string& path, const std::string& who);

// The one conversion of a JSON value to an integer: a JSON integer that fits int64_t, or nullopt.
// Only a number written as an integer is one: 20.0 and 2e1 are floats, as Python's json module
// reads them (Hugging Face's configs are read so, and a float size is refused there too), and are
// refused like 12.7. A float is never cast, which past int64_t's range (1e300) would be undefined
// behaviour.
std::optional<int64_t> json_to_int64(const nlohmann::json& value);
// The same for sizes and offsets the file formats define as unsigned: a non-negative JSON integer
// that fits uint64_t.
std::optional<uint64_t> json_to_uint64(const nlohmann::json& value);

// A value as an error message shows it: a number, string, boolean or null as written ("12.7",
// "\"big\""), an array or object by its kind only ("a JSON array"), since writing back a deeply
// nested value would recurse as deeply.
std::string json_value_for_error(const nlohmann::json& value);

// A JSON object read key by key. Every error is "<who>: '<path>': key '<key>' <problem>".
class JsonObjectReader {
 public:
  // Reads `path` (read_json_file) and keeps the document; its top level must be an object.
  static JsonObjectReader read_file(const std::string& path, const std::string& who);
  // Reads `object`, which came from `path` and must outlive the reader. Throws when it is not an
  // object.
  JsonObjectReader(const nlohmann::json& object, std::string path, std::string who);

  const std::string& path() const { return path_; }
  const std::string& who() const { return who_; }
  const nlohmann::json& object() const { return *object_; }
  // Whether `key` is present (with any value, null included).
  bool has(const std::string& key) const { return object_->contains(key); }
  // Whether `key` is present with a value other than null: Hugging Face's configs write null for
  // "the default".
  bool has_value(const std::string& key) const;

  // The value of `key`, which must be present and of the named kind.
  const nlohmann::json& at(const std::string& key) const;
  int64_t integer_at(const std::string& key) const;  // through json_to_int64
  double number_at(const std::string& key) const;    // any JSON number
  bool boolean_at(const std::string& key) const;
  std::string string_at(const std::string& key) const;
  const nlohmann::json& array_at(const std::string& key) const;
  std::vector<std::string> strings_at(const std::string& key) const;
  // Reads `key` into `into` when it is present with a value other than null (integer_at,
  // number_at); otherwise leaves `into` as it was: a config's default.
  void read_integer(const std::string& key, int64_t& into) const;
  void read_number(const std::string& key, double& into) const;
  // A reader of the object at `key`, whose errors name the key as "<key>.<inner key>".
  JsonObjectReader object_at(const std::string& key) const;

  // Throws "<who>: '<path>': key '<key>' <problem>".
  [[noreturn]] void fail_at(const std::string& key, const std::string& problem) const;

 private:
  JsonObjectReader(std::shared_ptr<const nlohmann::json> document, std::string path, std::string who);

  std::shared_ptr<const nlohmann::json> document_;  // held when read from a file
  const nlohmann::json* object_;
  std::string path_, who_;
  std::string key_prefix_;  // "model." for a reader from object_at("model")
};

}  // namespace ember
