// Vocabulary: tokens in id order and the reverse index.
#include "nn/text/vocabulary.h"

#include "core/error.h"

namespace ember::text {

Vocabulary::Vocabulary(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const auto [existing, inserted] = ids_.emplace(tokens_[i], static_cast<int64_t>(i));
    EMBER_CHECK(inserted, "Vocabulary: token '{}' appears twice (ids {} and {})", tokens_[i], existing->second, i);
  }
}

int64_t Vocabulary::add(const std::string& token) {
  const auto [position, inserted] = ids_.emplace(token, size());
  if (inserted) tokens_.push_back(token);
  return position->second;
}

std::optional<int64_t> Vocabulary::find(std::string_view token) const {
  const auto found = ids_.find(token);
  if (found == ids_.end()) return std::nullopt;
  return found->second;
}

int64_t Vocabulary::id(std::string_view token) const {
  const std::optional<int64_t> found = find(token);
  EMBER_CHECK(found.has_value(), "Vocabulary: token '{}' is not in the vocabulary of {} tokens", token, size());
  return *found;
}

const std::string& Vocabulary::token(int64_t id) const {
  EMBER_CHECK(id >= 0 && id < size(), "Vocabulary: id {} is outside the vocabulary [0, {})", id, size());
  return tokens_[static_cast<size_t>(id)];
}

}  // namespace ember::text
