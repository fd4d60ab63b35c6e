// The sizes and counts an example reads back from its config.json: checked to be JSON integers
// that fit int64_t, since nlohmann-json converts a float such as 1e300 to an integer with a plain
// cast, which is undefined behaviour when the value does not fit.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace ember::examples {

// object[key] as int64_t. A missing key, or a value that is not an integer within int64_t
// (a float, a string, 2^63 or more), throws ember::Error naming the file and the key.
inline int64_t config_integer(const nlohmann::json& object, const std::string& key, const std::string& path) {
  EMBER_CHECK(object.is_object() && object.contains(key), "{}: key '{}' is missing", path, key);
  const nlohmann::json& value = object.at(key);
  const bool fits =
      value.is_number_unsigned() ? value.get<uint64_t>() <= uint64_t(INT64_MAX) : value.is_number_integer();
  // A number or string is shown as written; an array or object only by its kind, since writing
  // back a value nested a hundred thousand levels deep would recurse as deeply.
  EMBER_CHECK(fits, "{}: key '{}' should be an integer, not {}", path, key,
              value.is_primitive() ? value.dump() : std::string("a JSON ") + value.type_name());
  return value.get<int64_t>();
}

}  // namespace ember::examples
