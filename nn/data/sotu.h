// The State of the Union addresses (1790-2016), plain English prose for masked-language-model
// pretraining, with the split of DATA.md: addresses of years divisible by 10 are held out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::datasets {

struct Address {
  int64_t year = 0;
  std::string president;  // "george washington", from the file name
  std::string text;
};

struct SotuData {
  std::vector<Address> train;     // in file-name order (by year)
  std::vector<Address> held_out;  // the years divisible by 10
  int64_t words = 0;              // whitespace-separated words in all of them
};

// Reads data_dir/sotu/ (data_dir is the folder fetch_data.sh fills, usually "data").
SotuData load_sotu(const std::string& data_dir);

// Reads every YEAR_FIRST_LAST_PARTY.txt in `folder` (the package's names, such as
// 1790_george_washington_n.txt; two addresses may share a year). Throws ember::Error for a
// missing or empty folder (with the fetch command), a file whose name does not start with a year,
// invalid UTF-8 (naming the file and line) or an empty address.
SotuData read_sotu(const std::string& folder);

}  // namespace ember::datasets
