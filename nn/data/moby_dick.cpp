// Reading Moby Dick and cutting off its last 10% as validation text.
#include "nn/data/moby_dick.h"

#include <filesystem>

#include "core/error.h"
#include "nn/data/data_files.h"

namespace ember::datasets {

TextSplit read_moby_dick(const std::string& path) {
  std::string text = read_data_file(path, "moby-dick", "read_moby_dick");
  check_utf8(text, path, "read_moby_dick");
  EMBER_CHECK(!text.empty(), "read_moby_dick: {} is empty; run: bash scripts/fetch_data.sh moby-dick", path);

  TextSplit split;
  split.characters = count_code_points(text);
  split.validation_characters = split.characters / 10;
  // Walk back from the end over validation_characters code points: each starts at a byte that
  // is not a continuation byte (10xxxxxx).
  size_t cut = text.size();
  for (int64_t seen = 0; seen < split.validation_characters;) {
    --cut;
    if ((static_cast<unsigned char>(text[cut]) & 0xC0) != 0x80) ++seen;
  }
  split.validation = text.substr(cut);
  text.resize(cut);
  split.train = std::move(text);
  return split;
}

TextSplit load_moby_dick(const std::string& data_dir) {
  return read_moby_dick((std::filesystem::path(data_dir) / "moby-dick/moby-dick.txt").string());
}

}  // namespace ember::datasets
