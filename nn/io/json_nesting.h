// Internal to the library (no public header includes it): parsing the JSON of a user's file with
// a bound on how deeply it nests. nlohmann-json parses any depth, but writing a value back (dump,
// as error messages do) recurses once per level, so a file of a hundred thousand '[' overflowed
// the stack. No file ember reads nests deeper than a few levels.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace ember {

inline constexpr int kMaxJsonNesting = 64;

// json::parse(text), calling `refuse()`, which must throw, as soon as the nesting passes
// kMaxJsonNesting. Other problems throw nlohmann-json's exceptions, as json::parse does.
template <class Refuse>
nlohmann::json parse_json_nested_at_most(std::string_view text, Refuse&& refuse) {
  return nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonNesting) refuse();
    return true;
  });
}

}  // namespace ember
