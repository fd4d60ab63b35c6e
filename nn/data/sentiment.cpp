// Reading the sentiment sentences from their JSON arrays and splitting them.
#include "nn/data/sentiment.h"

#include <fmt/ranges.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "nn/data/data_files.h"
#include "nn/io/json_reader.h"

namespace ember::datasets {

namespace {

using nlohmann::json;

bool is_empty_record(const json& record) {
  if (!record.is_object()) return false;
  const auto text = record.find("text");
  const auto label = record.find("class");
  return text != record.end() && text->is_string() && text->get_ref<const std::string&>().empty() &&
         label != record.end() && label->is_null();
}

// Fills `out` from a record with a non-blank text and a class of 0 or 1; false for any other.
bool parse_record(const json& record, LabelledText& out) {
  if (!record.is_object()) return false;
  const auto text = record.find("text");
  const auto label = record.find("class");
  if (text == record.end() || !text->is_string() || label == record.end()) return false;
  const std::optional<int64_t> value = json_to_int64(*label);
  if (value != 0 && value != 1) return false;
  const std::string& sentence = text->get_ref<const std::string&>();
  if (sentence.find_first_not_of(" \t\r\n") == std::string::npos) return false;
  out = {sentence, *value};
  return true;
}

}  // namespace

SentimentData read_sentiment(const std::vector<std::string>& paths) {
  EMBER_CHECK(!paths.empty(), "read_sentiment: no files given");
  SentimentData data;
  std::vector<LabelledText> sentences;
  for (const std::string& path : paths) {
    const std::string content = read_data_file(path, "sentiment", "read_sentiment");
    json records;
    try {
      records = json::parse(content);
    } catch (const json::parse_error& error) {
      // error.byte is 1-based: the position of the byte the parser stopped at. Its message
      // repeats the position after a prefix; the reason comes after "column N: ".
      const size_t offset = error.byte == 0 ? 0 : error.byte - 1;
      std::string reason = error.what();
      if (const size_t column = reason.find("column "); column != std::string::npos) {
        if (const size_t colon = reason.find(": ", column); colon != std::string::npos) reason.erase(0, colon + 2);
      }
      fail("read_sentiment: {}: line {}: not valid JSON: {}", path, line_of_offset(content, offset), reason);
    } catch (const json::exception& error) {
      // A number beyond double's range (1e999) is an out_of_range error, which has no position.
      fail("read_sentiment: {}: not valid JSON: {}", path, error.what());
    }
    EMBER_CHECK(records.is_array(), "read_sentiment: {}: line 1: expected a JSON array of records, found a {}", path,
                records.type_name());
    for (const json& record : records) {
      ++data.records_read;
      LabelledText sentence;
      if (is_empty_record(record)) {
        ++data.empty_dropped;
      } else if (parse_record(record, sentence)) {
        sentences.push_back(std::move(sentence));
      } else {
        ++data.malformed_skipped;
      }
    }
  }
  EMBER_CHECK(!sentences.empty(), "read_sentiment: no usable records in {}", fmt::join(paths, ", "));
  for (size_t i = 0; i < sentences.size(); ++i) {
    (i % 5 == 0 ? data.test : data.train).push_back(std::move(sentences[i]));
  }
  return data;
}

SentimentData load_sentiment(const std::string& data_dir) {
  std::vector<std::string> paths;
  for (const char* name : {"imdb.json", "amazon.json", "yelp.json"}) {
    paths.push_back((std::filesystem::path(data_dir) / "sentiment" / name).string());
  }
  return read_sentiment(paths);
}

}  // namespace ember::datasets
