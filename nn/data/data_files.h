// Finding and reading the raw data files of ember's examples: a missing file says which
// command fetches it, and corrupt text says which line is at fault.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ember::datasets {

// The data sets scripts/fetch_data.sh knows, by the name it takes on its command line.
//   sentiment   sentiment/{imdb,amazon,yelp}.json, sentiment/afinn-165.json
//   cmudict     cmudict/dict.txt
//   de-en       de-en/de-en.txt
//   moby-dick   moby-dick/moby-dick.txt
//   bert-vocab  bert/vocab.json
//   sotu        sotu/*.txt

// The path of `file` (its path under data_dir, e.g. "bert/vocab.json") after checking that it
// exists and is a regular file. Otherwise throws an ember::Error naming the path and the fetch
// command, e.g. "data_path: data/bert/vocab.json not found; run: bash scripts/fetch_data.sh
// bert-vocab".
std::string data_path(const std::string& data_dir, const std::string& set, const std::string& file);

// The whole content of the file at `path`, read in binary, for `reader` (the function named in
// error messages). A missing file throws "<reader>: <path> not found; run: bash
// scripts/fetch_data.sh <set>"; a file that exists but cannot be read throws naming the path.
std::string read_data_file(const std::string& path, const std::string& set, const std::string& reader);

// Checks that `text` is valid UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF); otherwise throws "<reader>: <path>: line N: invalid UTF-8 at byte B of the line".
void check_utf8(std::string_view text, const std::string& path, const std::string& reader);

// The number of code points in valid UTF-8 text.
int64_t count_code_points(std::string_view text);

// The 1-based line that byte `offset` of `text` lies on.
int64_t line_of_offset(std::string_view text, size_t offset);

}  // namespace ember::datasets
