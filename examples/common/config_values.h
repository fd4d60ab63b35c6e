// The sizes and counts an example reads back from its config.json, through the library's checked
// JSON reader (nn/io/json_reader.h): a JSON integer that fits int64_t, never a float cast to one
// (1e300 as int64_t would be undefined behaviour).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/io/json_reader.h"

namespace ember::examples {

// object[key] as int64_t. An `object` that is not a JSON object, a missing key, or a value that is
// not an integer within int64_t (a float such as 64.0 or 1e300, a string, 2^63 or more) throws
// ember::Error naming the file and the key.
inline int64_t config_integer(const nlohmann::json& object, const std::string& key, const std::string& path) {
  return JsonObjectReader(object, path, "config_integer").integer_at(key);
}

}  // namespace ember::examples
