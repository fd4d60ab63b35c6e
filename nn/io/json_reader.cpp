// Parsing a user's JSON with bounded nesting, and the checked reading of its values.
#include "nn/io/json_reader.h"

#include <fmt/format.h>

#include <cerrno>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "nn/io/regular_file.h"

namespace ember {

using nlohmann::json;

json parse_json(std::string_view text, const std::string& path, const std::string& who) {
  try {
    return parse_json_nested_at_most(text, [&] {
      fail("{}: '{}' is nested deeper than {} levels, which no file ember reads is", who, path, kMaxJsonNesting);
    });
  } catch (const json::exception& error) {
    // Not only parse_error: a number beyond double's range (1e999) is an out_of_range error.
    fail("{}: '{}' is not valid JSON ({})", who, path, error.what());
  }
}

json read_json_file(const std::string& path, const std::string& who) {
  check_regular_file(path, who);
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("{}: cannot open '{}': {}", who, path, std::error_code(errno, std::generic_category()).message());
  std::stringstream contents;
  contents << file.rdbuf();
  return parse_json(contents.str(), path, who);
}

std::optional<int64_t> json_to_int64(const json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t unsigned_value = value.get<uint64_t>();
    if (unsigned_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(unsigned_value);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

std::optional<uint64_t> json_to_uint64(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return static_cast<uint64_t>(value.get<int64_t>());
  return std::nullopt;
}

std::string json_value_for_error(const json& value) {
  if (value.is_primitive()) return value.dump();
  return fmt::format("a JSON {}", value.type_name());
}

JsonObjectReader JsonObjectReader::read_file(const std::string& path, const std::string& who) {
  return JsonObjectReader(std::make_shared<const json>(read_json_file(path, who)), path, who);
}

JsonObjectReader::JsonObjectReader(std::shared_ptr<const json> document, std::string path, std::string who)
    : document_(std::move(document)), object_(document_.get()), path_(std::move(path)), who_(std::move(who)) {
  if (!object_->is_object()) {
    fail("{}: '{}': its top level is a JSON {}, not an object of keys", who_, path_, object_->type_name());
  }
}

JsonObjectReader::JsonObjectReader(const json& object, std::string path, std::string who)
    : object_(&object), path_(std::move(path)), who_(std::move(who)) {
  if (!object_->is_object()) {
    fail("{}: '{}': expected a JSON object of keys, not a JSON {}", who_, path_, object_->type_name());
  }
}

void JsonObjectReader::fail_at(const std::string& key, const std::string& problem) const {
  fail("{}: '{}': key '{}{}' {}", who_, path_, key_prefix_, key, problem);
}

bool JsonObjectReader::has_value(const std::string& key) const {
  const auto found = object_->find(key);
  return found != object_->end() && !found->is_null();
}

void JsonObjectReader::read_integer(const std::string& key, int64_t& into) const {
  if (has_value(key)) into = integer_at(key);
}

void JsonObjectReader::read_number(const std::string& key, double& into) const {
  if (has_value(key)) into = number_at(key);
}

const json& JsonObjectReader::at(const std::string& key) const {
  const auto found = object_->find(key);
  if (found == object_->end()) fail_at(key, "is missing");
  return *found;
}

int64_t JsonObjectReader::integer_at(const std::string& key) const {
  const json& value = at(key);
  const std::optional<int64_t> integer = json_to_int64(value);
  if (integer) return *integer;
  if (value.is_number_float()) {
    fail_at(key, fmt::format("should be an integer, not {} (a number written with a fraction or an exponent is a "
                             "float, 20.0 too)", json_value_for_error(value)));
  }
  if (value.is_number()) fail_at(key, fmt::format("should be an integer within int64, not {}", value.dump()));
  fail_at(key, fmt::format("should be an integer, not {}", json_value_for_error(value)));
}

double JsonObjectReader::number_at(const std::string& key) const {
  const json& value = at(key);
  if (!value.is_number()) fail_at(key, fmt::format("should be a number, not {}", json_value_for_error(value)));
  return value.get<double>();
}

bool JsonObjectReader::boolean_at(const std::string& key) const {
  const json& value = at(key);
  if (!value.is_boolean()) fail_at(key, fmt::format("should be true or false, not {}", json_value_for_error(value)));
  return value.get<bool>();
}

std::string JsonObjectReader::string_at(const std::string& key) const {
  const json& value = at(key);
  if (!value.is_string()) fail_at(key, fmt::format("should be a string, not {}", json_value_for_error(value)));
  return value.get<std::string>();
}

const json& JsonObjectReader::array_at(const std::string& key) const {
  const json& value = at(key);
  if (!value.is_array()) fail_at(key, fmt::format("should be an array, not {}", json_value_for_error(value)));
  return value;
}

std::vector<std::string> JsonObjectReader::strings_at(const std::string& key) const {
  const json& array = array_at(key);
  std::vector<std::string> strings;
  strings.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    if (!array[i].is_string()) {
      fail_at(key, fmt::format("should hold strings, but element {} is {}", i, json_value_for_error(array[i])));
    }
    strings.push_back(array[i].get<std::string>());
  }
  return strings;
}

JsonObjectReader JsonObjectReader::object_at(const std::string& key) const {
  const json& value = at(key);
  if (!value.is_object()) fail_at(key, fmt::format("should be an object, not {}", json_value_for_error(value)));
  JsonObjectReader inner(value, path_, who_);
  inner.document_ = document_;
  inner.key_prefix_ = key_prefix_ + key + ".";
  return inner;
}

}  // namespace ember
