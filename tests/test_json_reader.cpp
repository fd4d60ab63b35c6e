// nn/io/json_reader: the one checked reader of every JSON file ember is handed. A JSON integer
// within int64_t becomes an integer; a float (12.7, 20.0, 1e300), a string, an array, 2^63 are
// refused, never cast; every error names the reader, the file and the key.
#include <sys/stat.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "helpers.h"
#include "nn/io/json_reader.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::testing;
using nlohmann::json;

TEST_CASE("json_to_int64 takes JSON integers within int64_t and nothing else") {
  CHECK(json_to_int64(json::parse("20")) == 20);
  CHECK(json_to_int64(json::parse("-3")) == -3);
  CHECK(json_to_int64(json::parse("9223372036854775807")) == std::numeric_limits<int64_t>::max());
  CHECK(json_to_int64(json::parse("-9223372036854775808")) == std::numeric_limits<int64_t>::min());
  CHECK(json_to_int64(json(int64_t{7})) == 7);   // built in code: a signed integer
  CHECK(json_to_int64(json(uint64_t{7})) == 7);  // and an unsigned one
  // Python's json module reads 20.0 and 2e1 as floats: so does ember, whole or not.
  for (const char* refused : {"20.0", "2e1", "12.7", "8.5", "1.5", "1e30", "1e300", "-1e300", "9223372036854775808",
                              "18446744073709551615", "\"20\"", "true", "null", "[20]", "{\"a\": 20}"}) {
    CAPTURE(refused);
    CHECK_FALSE(json_to_int64(json::parse(refused)).has_value());
  }
}

TEST_CASE("json_to_uint64 takes non-negative JSON integers within uint64_t") {
  CHECK(json_to_uint64(json::parse("0")) == 0u);
  CHECK(json_to_uint64(json::parse("18446744073709551615")) == std::numeric_limits<uint64_t>::max());
  CHECK(json_to_uint64(json(int64_t{5})) == 5u);
  for (const char* refused : {"-1", "8.0", "1e19", "\"8\"", "null"}) {
    CAPTURE(refused);
    CHECK_FALSE(json_to_uint64(json::parse(refused)).has_value());
  }
}

TEST_CASE("json_value_for_error writes primitives as written and containers by their kind") {
  CHECK(json_value_for_error(json::parse("12.7")) == "12.7");
  CHECK(json_value_for_error(json::parse("\"big\"")) == "\"big\"");
  CHECK(json_value_for_error(json::parse("null")) == "null");
  CHECK(json_value_for_error(json::parse("[1, 2]")) == "a JSON array");
  CHECK(json_value_for_error(json::parse("{}")) == "a JSON object");
}

TEST_CASE("JsonObjectReader reads each kind, and refuses a wrong one naming the reader, the file and the key") {
  const json document = json::parse(R"({"layers": 2, "rate": 0.5, "whole": 3, "name": "bert", "on": true,
    "sizes": [1, 2], "words": ["a", "b"], "mixed": ["a", 1], "nothing": null, "inner": {"heads": 4, "width": 8.5},
    "fraction": 12.7, "float_whole": 20.0, "huge": 1e300, "large": 1e30, "too_big": 9223372036854775808})");
  const JsonObjectReader reader(document, "config.json", "Reader");
  CHECK(reader.integer_at("layers") == 2);
  CHECK(reader.number_at("rate") == 0.5);
  CHECK(reader.number_at("whole") == 3.0);  // an integer is a number too
  CHECK(reader.string_at("name") == "bert");
  CHECK(reader.boolean_at("on"));
  CHECK(reader.array_at("sizes").size() == 2);
  CHECK(reader.strings_at("words") == std::vector<std::string>{"a", "b"});
  CHECK(reader.object_at("inner").integer_at("heads") == 4);
  CHECK(reader.has("nothing"));
  CHECK_FALSE(reader.has_value("nothing"));
  CHECK_FALSE(reader.has_value("absent"));
  CHECK(reader.has_value("layers"));

  CHECK_THROWS_WITH_ALL(reader.integer_at("fraction"), "Reader: 'config.json': key 'fraction' should be an integer",
                        "12.7");
  CHECK_THROWS_WITH_ALL(reader.integer_at("float_whole"), "'float_whole'", "not 20.0", "20.0 too");
  CHECK_THROWS_WITH_ALL(reader.integer_at("huge"), "'huge'", "1e+300");
  CHECK_THROWS_WITH_ALL(reader.integer_at("large"), "'large'", "1e+30");
  CHECK_THROWS_WITH_ALL(reader.integer_at("too_big"), "'too_big'", "within int64", "9223372036854775808");
  CHECK_THROWS_WITH_ALL(reader.integer_at("name"), "'name'", "should be an integer, not \"bert\"");
  CHECK_THROWS_WITH_ALL(reader.integer_at("sizes"), "'sizes'", "not a JSON array");
  CHECK_THROWS_WITH_ALL(reader.integer_at("nothing"), "'nothing'", "not null");
  CHECK_THROWS_WITH_ALL(reader.integer_at("absent"), "Reader", "config.json", "'absent' is missing");
  CHECK_THROWS_WITH_ALL(reader.number_at("name"), "'name'", "should be a number");
  CHECK_THROWS_WITH_ALL(reader.boolean_at("layers"), "'layers'", "true or false", "not 2");
  CHECK_THROWS_WITH_ALL(reader.string_at("layers"), "'layers'", "should be a string");
  CHECK_THROWS_WITH_ALL(reader.array_at("name"), "'name'", "should be an array");
  CHECK_THROWS_WITH_ALL(reader.strings_at("mixed"), "'mixed'", "element 1 is 1");
  CHECK_THROWS_WITH_ALL(reader.object_at("sizes"), "'sizes'", "should be an object");
  // A nested reader names the key by its path.
  CHECK_THROWS_WITH_ALL(reader.object_at("inner").integer_at("width"), "key 'inner.width'", "8.5");
  CHECK_THROWS_WITH_ALL(JsonObjectReader(json::parse("[1]"), "config.json", "Reader"), "Reader", "config.json",
                        "not a JSON array");
}

TEST_CASE("read_json_file and JsonObjectReader::read_file refuse what is not a readable JSON object") {
  ScratchDir scratch("json_reader");
  const JsonObjectReader read = JsonObjectReader::read_file(scratch.write("ok.json", R"({"a": 1})"), "Reader");
  CHECK(read.integer_at("a") == 1);
  CHECK(read.path() == scratch.file("ok.json"));
  CHECK_THROWS_WITH_ALL(read_json_file(scratch.file("absent.json"), "Reader"), "Reader", "cannot open",
                        "absent.json");
  CHECK_THROWS_WITH_ALL(read_json_file(scratch.path(), "Reader"), "Reader", "is not a regular file");
  const std::string fifo = scratch.file("fifo.json");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_ALL(read_json_file(fifo, "Reader"), "Reader", "fifo.json", "is not a regular file");
  CHECK_THROWS_WITH_ALL(read_json_file(scratch.write("bad.json", "{\"a\": "), "Reader"), "bad.json",
                        "not valid JSON");
  CHECK_THROWS_WITH_ALL(read_json_file(scratch.write("range.json", "[1e999]"), "Reader"), "range.json",
                        "not valid JSON");
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  CHECK_THROWS_WITH_ALL(read_json_file(scratch.write("deep.json", deep), "Reader"), "deep.json",
                        "nested deeper than 64 levels");
  CHECK_THROWS_WITH_ALL(JsonObjectReader::read_file(scratch.write("list.json", "[1, 2]"), "Reader"), "list.json",
                        "top level is a JSON array, not an object");
  CHECK_THROWS_WITH_ALL(parse_json("{", "inline.json", "Reader"), "Reader: 'inline.json' is not valid JSON");
}
