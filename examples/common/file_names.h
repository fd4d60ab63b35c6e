// File names made from what a run was asked: a sentence becomes a short slug, and a file that
// exists already is kept, the new one taking the next free index.
//
//   examples::unused_path("out/text_classifier", "attention-" + examples::slug("What a phone!"), ".svg")
//     -> "out/text_classifier/attention-what-a-phone.svg", then "...-what-a-phone-2.svg"
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace ember::examples {

// The words of `text`, lower-cased and joined by '-': ASCII letters and digits are kept, every
// run of anything else (spaces, punctuation, UTF-8 bytes) becomes one '-'. At most `max_length`
// characters, cut at a '-' where one is near the end. "sentence" when nothing is left.
inline std::string slug(const std::string& text, size_t max_length = 40) {
  std::string result;
  for (const char c : text) {
    const unsigned char byte = static_cast<unsigned char>(c);
    const bool kept = (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') || (byte >= '0' && byte <= '9');
    if (kept) {
      result += static_cast<char>(byte >= 'A' && byte <= 'Z' ? byte - 'A' + 'a' : byte);
    } else if (!result.empty() && result.back() != '-') {
      result += '-';
    }
  }
  if (result.size() > max_length) {
    const size_t cut = result.rfind('-', max_length);
    // A cut at a '-' keeps whole words, unless it would drop more than a third.
    result.resize(cut != std::string::npos && cut >= max_length * 2 / 3 ? cut : max_length);
  }
  while (!result.empty() && result.back() == '-') result.pop_back();
  return result.empty() ? "sentence" : result;
}

// directory/stem + extension if no such file exists, else directory/stem-2 + extension,
// stem-3, ...: the first that does not.
inline std::filesystem::path unused_path(const std::filesystem::path& directory, const std::string& stem,
                                         const std::string& extension) {
  std::filesystem::path path = directory / (stem + extension);
  for (int index = 2; std::filesystem::exists(path); ++index) {
    path = directory / (stem + "-" + std::to_string(index) + extension);
  }
  return path;
}

}  // namespace ember::examples
