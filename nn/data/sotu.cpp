// Reading the State of the Union addresses, one file each, and holding out every tenth year.
#include "nn/data/sotu.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/error.h"
#include "nn/data/data_files.h"

namespace ember::datasets {

namespace {

// "1790_george_washington_n" -> year 1790, president "george washington" (the last part is the
// party's code); the year must be four digits.
Address parse_name(const std::filesystem::path& file) {
  const std::string stem = file.stem().string();
  const size_t first = stem.find('_'), last = stem.rfind('_');
  const bool has_year = first == 4 && std::all_of(stem.begin(), stem.begin() + 4, [](char c) { return std::isdigit(c); });
  EMBER_CHECK(has_year && last > first, "read_sotu: {} is not named YEAR_PRESIDENT_PARTY.txt", file.string());
  Address address;
  address.year = std::stoll(stem.substr(0, 4));
  address.president = stem.substr(first + 1, last - first - 1);
  std::replace(address.president.begin(), address.president.end(), '_', ' ');
  return address;
}

int64_t count_words(const std::string& text) {
  int64_t words = 0;
  bool in_word = false;
  for (const char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

}  // namespace

SotuData read_sotu(const std::string& folder) {
  std::error_code error;
  EMBER_CHECK(std::filesystem::is_directory(folder, error), "read_sotu: {} not found; run: bash scripts/fetch_data.sh "
              "sotu", folder);
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  EMBER_CHECK(!files.empty(), "read_sotu: {} holds no .txt file; run: bash scripts/fetch_data.sh sotu", folder);
  std::sort(files.begin(), files.end());
  SotuData data;
  for (const auto& file : files) {
    Address address = parse_name(file);
    address.text = read_data_file(file.string(), "sotu", "read_sotu");
    check_utf8(address.text, file.string(), "read_sotu");
    const int64_t words = count_words(address.text);
    EMBER_CHECK(words > 0, "read_sotu: {} is empty", file.string());
    data.words += words;
    (address.year % 10 == 0 ? data.held_out : data.train).push_back(std::move(address));
  }
  return data;
}

SotuData load_sotu(const std::string& data_dir) { return read_sotu((std::filesystem::path(data_dir) / "sotu").string()); }

}  // namespace ember::datasets
