// examples::config_integer, with which the examples read their sizes back from config.json (through
// the library's JsonObjectReader): a JSON integer within int64_t, or an ember::Error naming the file
// and the key.
#include <nlohmann/json.hpp>

#include "../examples/common/config_values.h"
#include "helpers.h"

using namespace ember;

TEST_CASE("config_integer reads a JSON integer and refuses every other value, naming the file and the key") {
  const auto config = nlohmann::json::parse(R"({"d_model": 64, "negative": -3, "float": 1e300, "fraction": 64.5,
    "text": "64", "too_big": 9223372036854775808, "largest": 9223372036854775807, "model": {"heads": 4}})");
  CHECK(examples::config_integer(config, "d_model", "config.json") == 64);
  CHECK(examples::config_integer(config, "negative", "config.json") == -3);
  CHECK(examples::config_integer(config, "largest", "config.json") == INT64_MAX);
  CHECK(examples::config_integer(config.at("model"), "heads", "config.json") == 4);
  // 1e300 as int64_t was a plain cast inside nlohmann-json: undefined behaviour, which
  // UndefinedBehaviorSanitizer reports ("1e+300 is outside the range of representable values").
  CHECK_THROWS_WITH_ALL(examples::config_integer(config, "float", "config.json"), "config.json", "'float'",
                        "should be an integer", "1e+300");
  CHECK_THROWS_WITH_ALL(examples::config_integer(config, "fraction", "config.json"), "'fraction'", "64.5");
  CHECK_THROWS_WITH_ALL(examples::config_integer(config, "text", "config.json"), "'text'", "\"64\"");
  CHECK_THROWS_WITH_ALL(examples::config_integer(config, "too_big", "config.json"), "'too_big'",
                        "9223372036854775808");
  const std::string brackets = std::string(100'000, '[') + std::string(100'000, ']');
  const auto deep = nlohmann::json::parse("{\"layers\": " + brackets + "}");
  CHECK_THROWS_WITH_ALL(examples::config_integer(deep, "layers", "config.json"), "'layers'", "not a JSON array");
  CHECK_THROWS_WITH_ALL(examples::config_integer(config, "layers", "config.json"), "config.json", "'layers'",
                        "missing");
  CHECK_THROWS_WITH_ALL(examples::config_integer(nlohmann::json::array(), "layers", "config.json"), "config.json",
                        "not a JSON array");
  // A whole number written as a float is a float, as Python's json module reads it.
  CHECK_THROWS_WITH_ALL(examples::config_integer(nlohmann::json::parse(R"({"heads": 4.0})"), "heads", "config.json"),
                        "'heads'", "should be an integer, not 4.0");
}
