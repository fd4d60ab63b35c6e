// Moby Dick as one text for a character-level language model, with the split of DATA.md:
// the last 10% of the characters are validation.
#pragma once

#include <cstdint>
#include <string>

namespace ember::datasets {

struct TextSplit {
  std::string train;
  std::string validation;
  int64_t characters = 0;             // code points in the whole text
  int64_t validation_characters = 0;  // code points in `validation`
};

// Reads data_dir/moby-dick/moby-dick.txt (data_dir is the folder fetch_data.sh fills, usually
// "data").
TextSplit load_moby_dick(const std::string& data_dir);

// Reads a UTF-8 text file whole and splits it: of its N code points, the last N / 10 (rounded
// down) are validation, the rest train, so the cut never falls inside a character. The text is
// kept as it is (line breaks included).
// Throws ember::Error for a missing file (with the fetch command), for invalid UTF-8 (naming
// the path and line), or for an empty file.
TextSplit read_moby_dick(const std::string& path);

}  // namespace ember::datasets
