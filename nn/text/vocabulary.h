// Vocabulary: the two-way map between tokens (strings) and their ids (0, 1, 2, ... in order).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::text {

class Vocabulary {
 public:
  Vocabulary() = default;
  // Token i gets id i. A duplicate token throws ember::Error naming it and both ids.
  explicit Vocabulary(std::vector<std::string> tokens);

  // Appends `token` and returns its new id; a token already present keeps its id.
  int64_t add(const std::string& token);

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  bool contains(std::string_view token) const { return find(token).has_value(); }
  std::optional<int64_t> find(std::string_view token) const;
  // The id of `token`; throws ember::Error when it is not in the vocabulary.
  int64_t id(std::string_view token) const;
  // The token of `id`; throws ember::Error when id is outside [0, size()).
  const std::string& token(int64_t id) const;
  const std::vector<std::string>& tokens() const { return tokens_; }

 private:
  // Lets find() take a string_view without building a std::string.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
};

}  // namespace ember::text
