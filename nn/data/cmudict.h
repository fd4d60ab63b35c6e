// The CMU Pronouncing Dictionary: words and their ARPAbet phonemes, with the split of DATA.md
// (about 123,900 words kept, every 20th one test).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::datasets {

struct Pronunciation {
  std::string word;                    // upper case A-Z and ', e.g. "EMBER"
  std::vector<std::string> phonemes;   // ARPAbet with stress digits, e.g. {"EH1", "M", "B", "ER0"}
};

struct CmudictData {
  std::vector<Pronunciation> train;
  std::vector<Pronunciation> test;
  int64_t lines_read = 0;          // lines other than blank ones and ";;;" comments
  int64_t variants_dropped = 0;    // alternative pronunciations, WORD(1), WORD(2), ...
  int64_t words_filtered = 0;      // words with a character outside A-Z and ' (A., 3-D, lower case)
  int64_t malformed_skipped = 0;   // no phonemes, or a phoneme that is not upper case letters
                                   // with an optional stress digit 0-2
};

// Reads data_dir/cmudict/dict.txt (data_dir is the folder fetch_data.sh fills, usually "data").
CmudictData load_cmudict(const std::string& data_dir);

// Reads a dictionary file: one entry a line, `WORD  PH ON EMES` (the word, white space, the
// phonemes separated by white space). Kept word i (0-based, in file order) is test when
// i % 20 == 0, train otherwise; both keep file order.
// Throws ember::Error for a missing file (with the fetch command) or one with no usable entry.
CmudictData read_cmudict(const std::string& path);

}  // namespace ember::datasets
