// The sentiment sentences (UCI "Sentiment Labelled Sentences": IMDb, Amazon and Yelp reviews,
// 1,000 each) with the split of DATA.md: 2,400 train, 600 test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::datasets {

struct LabelledText {
  std::string text;  // as in the file (the sentences end in two spaces; tokenizers drop them)
  int64_t label;     // 0 negative, 1 positive
};

struct SentimentData {
  std::vector<LabelledText> train;
  std::vector<LabelledText> test;
  int64_t records_read = 0;       // array elements in all files
  int64_t empty_dropped = 0;      // {"text": "", "class": null}, one at the end of each file
  int64_t malformed_skipped = 0;  // not an object, text not a non-empty string, class not 0 or 1
};

// Reads data_dir/sentiment/{imdb,amazon,yelp}.json (data_dir is the folder fetch_data.sh
// fills, usually "data").
SentimentData load_sentiment(const std::string& data_dir);

// Reads the given files, each a JSON array of {"text": ..., "class": 0|1}, concatenated in
// order. Kept sentence i (0-based, after dropping the empty and malformed records) is test
// when i % 5 == 0, train otherwise; both keep file order.
// Throws ember::Error for a missing file (with the fetch command), or for a file that is not
// a JSON array (naming the path and line).
SentimentData read_sentiment(const std::vector<std::string>& paths);

}  // namespace ember::datasets
