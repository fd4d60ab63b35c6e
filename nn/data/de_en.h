// German-English sentence pairs from the Ding dictionary (Debian trans-de-en), extracted and
// split as DATA.md describes: about 18,700 pairs, every 20th one test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::datasets {

struct GermanEnglishPair {
  std::string german;   // e.g. "Die Insel ist voll von Sommergästen."
  std::string english;  // e.g. "Summer visitors throng the island."
};

struct GermanEnglishData {
  std::vector<GermanEnglishPair> train;
  std::vector<GermanEnglishPair> test;
  int64_t lines_read = 0;           // entry lines (not blank, not # comments)
  int64_t comment_lines = 0;        // lines starting with #
  int64_t malformed_skipped = 0;    // lines without exactly one " :: " between German and English
  int64_t mismatched_skipped = 0;   // lines whose sides have different numbers of | sub-entries
  int64_t sentence_pairs = 0;       // aligned sub-entries that passed the sentence test, duplicates included
  int64_t duplicates_removed = 0;   // sentence_pairs - train.size() - test.size()
};

// Reads data_dir/de-en/de-en.txt (data_dir is the folder fetch_data.sh fills, usually "data").
GermanEnglishData load_de_en(const std::string& data_dir);

// Reads a file in the Ding format (UTF-8, one entry a line, `German :: English`, # comments)
// and extracts sentence pairs:
//  1. each side is cut at | into sub-entries, aligned one to one (a line whose sides have
//     different counts is skipped and counted);
//  2. of each sub-entry, the first ;-separated variant (a ; inside brackets does not count);
//  3. annotations in {...}, [...] and (...) are removed with their brackets. Brackets nest and
//     match by depth, not by kind; a closing bracket with no opening one is removed, and an
//     opening bracket that is never closed removes the rest of the variant;
//  4. runs of spaces and tabs become one space, and both ends are trimmed;
//  5. the pair is kept when both sides end in '.', '?' or '!' and have at least 4 words.
// The pairs are then deduplicated and sorted by (German, English) in byte order; pair i is
// test when i % 20 == 0, train otherwise (both stay sorted).
// Throws ember::Error for a missing file (with the fetch command), for invalid UTF-8 (naming
// the path and line), or when no pair is found.
GermanEnglishData read_de_en(const std::string& path);

}  // namespace ember::datasets
