// The data set readers on small fixtures written here: records kept, dropped and counted,
// the splits of DATA.md, and the errors for missing or corrupt files.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "nn/data/datasets.h"
#include "helpers.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::testing;
using namespace ember::datasets;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> texts(const std::vector<LabelledText>& sentences) {
  std::vector<std::string> out;
  for (const auto& sentence : sentences) out.push_back(sentence.text);
  return out;
}

std::vector<int64_t> labels(const std::vector<LabelledText>& sentences) {
  std::vector<int64_t> out;
  for (const auto& sentence : sentences) out.push_back(sentence.label);
  return out;
}

std::vector<std::string> words(const std::vector<Pronunciation>& entries) {
  std::vector<std::string> out;
  for (const auto& entry : entries) out.push_back(entry.word);
  return out;
}

std::vector<std::string> germans(const std::vector<GermanEnglishPair>& pairs) {
  std::vector<std::string> out;
  for (const auto& pair : pairs) out.push_back(pair.german);
  return out;
}

}  // namespace

// --- data files ---------------------------------------------------------------------------------

TEST_CASE("data_path returns the file's path, or names the fetch command when it is missing") {
  ScratchDir dir("datasets");
  dir.write("bert/vocab.json", "[]");
  CHECK(data_path(dir.path(), "bert-vocab", "bert/vocab.json") == (fs::path(dir.path()) / "bert/vocab.json").string());
  CHECK_THROWS_WITH_ALL(data_path(dir.path(), "cmudict", "cmudict/dict.txt"), "data_path: ",
                        "cmudict/dict.txt not found", "run: bash scripts/fetch_data.sh cmudict");
  CHECK_THROWS_WITH_ALL(data_path(dir.path(), "bert-vocab", "bert"), "bert", "not a regular file",
                        "run: bash scripts/fetch_data.sh bert-vocab");
}

TEST_CASE("check_utf8 accepts valid text and names the line and byte of invalid UTF-8") {
  check_utf8("plain ASCII\nSommergäste — “quoted” 🐋\n", "ok.txt", "reader");
  CHECK_THROWS_WITH_ALL(check_utf8("first\nsecond \xff\n", "bad.txt", "reader"), "reader: bad.txt: line 2",
                        "invalid UTF-8 at byte 8 of the line");
  CHECK_THROWS_WITH_ALL(check_utf8("\xc0\xaf", "overlong.txt", "reader"), "overlong.txt: line 1");
  CHECK_THROWS_WITH_ALL(check_utf8("a\nb\nc\xed\xa0\x80", "surrogate.txt", "reader"), "surrogate.txt: line 3");
  CHECK_THROWS_WITH_ALL(check_utf8("cut \xe2\x80", "truncated.txt", "reader"), "truncated.txt: line 1",
                        "byte 5 of the line");
  CHECK(count_code_points("a—é🐋") == 4);
}

// --- sentiment ----------------------------------------------------------------------------------

TEST_CASE("sentiment: the empty and malformed records are dropped and counted; every 5th sentence is test") {
  ScratchDir dir("datasets");
  // imdb: 4 good records among 7 malformed ones, then the empty record.
  dir.write("sentiment/imdb.json", R"([
    {"text": "i0 A very slow movie.  ", "class": 0},
    {"text": "bad class as a string", "class": "1"},
    {"text": "i1 Loved it, \"truly\".", "class": 1},
    {"text": "bad class out of range", "class": 2},
    {"class": 1},
    {"text": 5, "class": 0},
    42,
    {"text": "i2 Ça alors — quel film!", "class": 1},
    {"text": "   ", "class": 0},
    {"text": "bad fractional class", "class": 0.5},
    {"text": "i3 Boring.", "class": 0},
    {"text": "", "class": null}
  ])");
  dir.write("sentiment/amazon.json",
            R"([{"text": "a0 Great phone.", "class": 1}, {"text": "a1 Broke in a week.", "class": 0},
                {"text": "a2 Works.", "class": 1, "extra": true}, {"text": "", "class": null}])");
  dir.write("sentiment/yelp.json", R"([{"text": "y0 Tasty.", "class": 1}, {"text": "y1 Cold food.", "class": 0},
    {"text": "y2 Slow service.", "class": 0}, {"text": "y3 Lovely staff.", "class": 1},
    {"text": "y4 Never again.", "class": 0}, {"text": "", "class": null}])");

  const SentimentData data = load_sentiment(dir.path());
  CHECK(data.records_read == 12 + 4 + 6);
  CHECK(data.empty_dropped == 3);
  CHECK(data.malformed_skipped == 7);
  // 12 kept sentences, imdb then amazon then yelp; 0, 5 and 10 are test.
  CHECK(texts(data.test) ==
        std::vector<std::string>{"i0 A very slow movie.  ", "a1 Broke in a week.", "y3 Lovely staff."});
  CHECK(labels(data.test) == std::vector<int64_t>{0, 0, 1});
  CHECK(texts(data.train) == std::vector<std::string>{"i1 Loved it, \"truly\".", "i2 Ça alors — quel film!",
                                                      "i3 Boring.", "a0 Great phone.", "a2 Works.", "y0 Tasty.",
                                                      "y1 Cold food.", "y2 Slow service.", "y4 Never again."});
  CHECK(labels(data.train) == std::vector<int64_t>{1, 1, 0, 1, 1, 1, 0, 0, 0});

  // Explicit paths, in the order given.
  const SentimentData yelp_only = read_sentiment({(fs::path(dir.path()) / "sentiment/yelp.json").string()});
  CHECK(texts(yelp_only.test) == std::vector<std::string>{"y0 Tasty."});
  CHECK(yelp_only.train.size() == 4);
}

TEST_CASE("sentiment: a missing file names the path and the fetch command") {
  ScratchDir dir("datasets");
  dir.write("sentiment/imdb.json", R"([{"text": "fine", "class": 1}])");
  CHECK_THROWS_WITH_ALL(load_sentiment(dir.path()), "read_sentiment: ", "sentiment/amazon.json not found",
                        "run: bash scripts/fetch_data.sh sentiment");
  CHECK_THROWS_WITH_ALL(read_sentiment({dir.path() + "/nowhere.json"}), "nowhere.json",
                        "run: bash scripts/fetch_data.sh sentiment");
}

TEST_CASE("sentiment: corrupt JSON names the path and line; a non-array or record-less file is refused") {
  ScratchDir dir("datasets");
  const std::string broken =
      dir.write("broken.json", "[\n  {\"text\": \"a\", \"class\": 1},\n  {\"text\": \"b\" \"class\": 0}\n]");
  CHECK_THROWS_WITH_ALL(read_sentiment({broken}), "read_sentiment", "broken.json: line 3: not valid JSON: syntax error",
                        "unexpected string literal");
  const std::string truncated = dir.write("truncated.json", "[{\"text\": \"a\", \"class\": 1},\n");
  CHECK_THROWS_WITH_ALL(read_sentiment({truncated}), "truncated.json: line 2");
  const std::string object = dir.write("object.json", R"({"text": "a", "class": 1})");
  CHECK_THROWS_WITH_ALL(read_sentiment({object}), "object.json: line 1", "expected a JSON array", "object");
  const std::string invalid_utf8 = dir.write("latin1.json", "[{\"text\": \"caf\xe9\", \"class\": 1}]");
  CHECK_THROWS_WITH_ALL(read_sentiment({invalid_utf8}), "latin1.json: line 1");
  // A number beyond double's range: the parser's out_of_range error, not a parse_error.
  const std::string huge = dir.write("huge.json", R"([{"text": "a", "class": 1},
 {"text": "b", "class": 1e999}])");
  CHECK_THROWS_WITH_ALL(read_sentiment({huge}), "read_sentiment", "huge.json", "not valid JSON", "1e999");
  const std::string nothing = dir.write("nothing.json", R"([{"text": "", "class": null}, {"oops": 1}])");
  CHECK_THROWS_WITH_ALL(read_sentiment({nothing}), "read_sentiment: no usable records", "nothing.json");
}

// --- CMUdict ------------------------------------------------------------------------------------

TEST_CASE("cmudict: variants, filtered words and malformed lines are dropped and counted apart") {
  ScratchDir dir("datasets");
  const std::string path = dir.write("cmudict/dict.txt",
                                     ";;; a comment line\n"
                                     "A  AH0\n"
                                     "A(1)  EY1\n"               // variant
                                     "A'S  EY1 Z\n"
                                     "A.  EY1\n"                 // filtered: '.'
                                     "ABLE-BODIED  EY1 B AH0 L B AA1 D IY0 D\n"  // filtered: '-'
                                     "aardvark  AA1 R D V AA2 R K\n"             // filtered: lower case
                                     "B2B  B IY1 T UW1 B IY1\n"  // filtered: digit
                                     "\n"
                                     "NOPHONEMES\n"              // malformed: no phonemes
                                     "BAD  B AE1 D9\n"           // malformed: stress digit 9
                                     "LOWER  l ow1\n"            // malformed: lower-case phonemes
                                     "  LEADING  L IY1 D IH0 NG\n"  // malformed: no word
                                     "WORD(2)  W ER1 D\n"        // variant
                                     "EMBER  EH1 M B ER0\r\n"    // Windows line ending
                                     "O'NEIL  OW0 N IY1 L  \n"   // trailing spaces
                                     "TAB\tT AE1 B");            // no final newline
  const CmudictData data = read_cmudict(path);
  CHECK(data.lines_read == 15);
  CHECK(data.variants_dropped == 2);
  CHECK(data.words_filtered == 4);
  CHECK(data.malformed_skipped == 4);
  CHECK(words(data.test) == std::vector<std::string>{"A"});
  CHECK(words(data.train) == std::vector<std::string>{"A'S", "EMBER", "O'NEIL", "TAB"});
  CHECK(data.train[1].phonemes == std::vector<std::string>{"EH1", "M", "B", "ER0"});
  CHECK(data.train[2].phonemes == std::vector<std::string>{"OW0", "N", "IY1", "L"});
  CHECK(data.train[3].phonemes == std::vector<std::string>{"T", "AE1", "B"});
  CHECK(data.test[0].phonemes == std::vector<std::string>{"AH0"});
}

TEST_CASE("cmudict: in file order, kept word i is test when i % 20 == 0") {
  ScratchDir dir("datasets");
  std::string content;
  for (int i = 0; i < 45; ++i) {
    const std::string word = std::string("W") + static_cast<char>('A' + i / 26) + static_cast<char>('A' + i % 26);
    content += word + "  W ER1 D\n";
    content += word + "(1)  W ER0 D\n";  // variants do not count towards i
  }
  dir.write("cmudict/dict.txt", content);
  const CmudictData data = load_cmudict(dir.path());
  CHECK(words(data.test) == std::vector<std::string>{"WAA", "WAU", "WBO"});  // words 0, 20 and 40
  CHECK(data.train.size() == 42);
  CHECK(data.train.front().word == "WAB");
  CHECK(data.variants_dropped == 45);
}

TEST_CASE("cmudict: a missing file names the fetch command; a file with no entry is refused") {
  ScratchDir dir("datasets");
  CHECK_THROWS_WITH_ALL(load_cmudict(dir.path()), "read_cmudict: ", "cmudict/dict.txt not found",
                        "run: bash scripts/fetch_data.sh cmudict");
  const std::string path = dir.write("dict.txt", ";;; only a comment\nlower  case\n");
  CHECK_THROWS_WITH_ALL(read_cmudict(path), "read_cmudict: no usable entry", "dict.txt", "1 malformed");
}

// --- DE-EN --------------------------------------------------------------------------------------

TEST_CASE("de-en: sub-entries, first variants, annotations, sentence test, dedup and byte order") {
  ScratchDir dir("datasets");
  const std::string path = dir.write(
      "de-en/de-en.txt",
      "# Version :: devel 2023-01-30\n"
      "# License :: GPL Version 2 or later\n"
      // The example of DATA.md: the fifth sub-entry, first variants.
      "sich drängen {vr} | sich drängend | Die Kinder drängten in die Halle. | Die Insel ist voll von Sommergästen.; "
      "Die Insel quillt über von Sommergästen. :: to throng | thronging | The children thronged into the hall. | "
      "Summer visitors throng the island.; The island is thronged with tourists.\n"
      // Annotations, a ; inside brackets, and nesting.
      "Er ist {ugs.} (sehr) müde (wirklich; echt) heute. [ugs.] :: "
      "He is (very) tired [coll.] today (really; truly) indeed.\n"
      "Das {a (b) [c]} ist verschachtelt, nicht wahr? :: This {x (y)} is nested, is it not?\n"
      // A closing bracket with no opening one goes; an unclosed one takes the rest with it.
      "Hier ist ) eine Klammer zu viel. :: Here is ] one bracket too many.\n"
      "Diese (Klammer geht nie zu. :: This (bracket never closes.\n"
      // Spaces and tabs collapse; both ends are trimmed.
      "   Viele   Leerzeichen\tsind  hier!  ::   Many   spaces\tare  here!   \n"
      // Too short on one side, no final punctuation, or both.
      "Eins zwei drei vier. :: One two three.\n"
      "Zu kurz. :: Far too short here.\n"
      "Ein Satz ohne Punkt am Ende :: A sentence without a full stop\n"
      // Mismatched sub-entry counts: skipped, even though the first would be a sentence.
      "Das ist ein guter Satz. | zwei :: That is a good sentence.\n"
      // No separator, or two.
      "Das ist keine Zeile im Format.\n"
      "Eins :: zwei :: drei\n"
      "\n"
      // Duplicates of pairs above (one exact, one after cleaning).
      "Die Insel ist voll von Sommergästen. :: Summer visitors throng the island.\n"
      "Die Kinder drängten in die Halle. [ugs.] :: The children  thronged into the hall.\n"
      // Byte order: upper case before lower case before umlauts.
      "Über allen Gipfeln ist Ruh. :: Over all the peaks is peace.\n"
      "das ist klein geschrieben. :: this is in lower case.\n"
      "Was machst du da gerade? :: What are you doing there?\n"
      // Same German, different English: both kept, ordered by the English.
      "Ich gehe jetzt nach Hause. :: I am going home now.\n"
      "Ich gehe jetzt nach Hause. :: I am going home at once.\n");

  const GermanEnglishData data = read_de_en(path);
  CHECK(data.comment_lines == 2);
  CHECK(data.lines_read == 19);
  CHECK(data.malformed_skipped == 2);
  CHECK(data.mismatched_skipped == 1);
  CHECK(data.sentence_pairs == 13);
  CHECK(data.duplicates_removed == 2);

  const std::vector<GermanEnglishPair> expected = {
      {"Das ist verschachtelt, nicht wahr?", "This is nested, is it not?"},
      {"Die Insel ist voll von Sommergästen.", "Summer visitors throng the island."},
      {"Die Kinder drängten in die Halle.", "The children thronged into the hall."},
      {"Er ist müde heute.", "He is tired today indeed."},
      {"Hier ist eine Klammer zu viel.", "Here is one bracket too many."},
      {"Ich gehe jetzt nach Hause.", "I am going home at once."},
      {"Ich gehe jetzt nach Hause.", "I am going home now."},
      {"Viele Leerzeichen sind hier!", "Many spaces are here!"},
      {"Was machst du da gerade?", "What are you doing there?"},
      {"das ist klein geschrieben.", "this is in lower case."},
      {"Über allen Gipfeln ist Ruh.", "Over all the peaks is peace."},
  };
  REQUIRE(data.test.size() == 1);
  CHECK(data.test[0].german == expected[0].german);
  CHECK(data.test[0].english == expected[0].english);
  REQUIRE(data.train.size() == expected.size() - 1);
  for (size_t i = 0; i < data.train.size(); ++i) {
    CAPTURE(i);
    CHECK(data.train[i].german == expected[i + 1].german);
    CHECK(data.train[i].english == expected[i + 1].english);
  }
}

TEST_CASE("de-en: in sorted order, pair i is test when i % 20 == 0") {
  ScratchDir dir("datasets");
  std::string content;
  // Written in reverse so the reader's sort decides the order.
  for (int i = 44; i >= 0; --i) {
    const std::string number = fmt::format("{:02d}", i);
    content += "Satz Nummer " + number + " ist hier. :: Sentence number " + number + " is here.\n";
  }
  dir.write("de-en/de-en.txt", content);
  const GermanEnglishData data = load_de_en(dir.path());
  CHECK(germans(data.test) ==
        std::vector<std::string>{"Satz Nummer 00 ist hier.", "Satz Nummer 20 ist hier.", "Satz Nummer 40 ist hier."});
  REQUIRE(data.train.size() == 42);
  CHECK(data.train.front().german == "Satz Nummer 01 ist hier.");
  CHECK(data.train.back().german == "Satz Nummer 44 ist hier.");
}

TEST_CASE("de-en: missing file, invalid UTF-8 and a file without sentences are refused") {
  ScratchDir dir("datasets");
  CHECK_THROWS_WITH_ALL(load_de_en(dir.path()), "read_de_en: ", "de-en/de-en.txt not found",
                        "run: bash scripts/fetch_data.sh de-en");
  const std::string latin1 =
      dir.write("latin1.txt", "# comment\nDas ist gut. :: That is good.\nSch\xf6n ist es hier. :: It is nice here.\n");
  CHECK_THROWS_WITH_ALL(read_de_en(latin1), "read_de_en", "latin1.txt: line 3", "invalid UTF-8");
  const std::string words_only = dir.write("words.txt", "Haus {n} | Häuser {pl} :: house | houses\n");
  CHECK_THROWS_WITH_ALL(read_de_en(words_only), "read_de_en: no sentence pair found", "words.txt", "1 lines read");
}

// --- Moby Dick ----------------------------------------------------------------------------------

TEST_CASE("moby dick: the last 10% of the code points are validation, cut between characters") {
  ScratchDir dir("datasets");
  // 21 code points in 24 bytes; the last 2 ("…é") take 5 bytes.
  const std::string text = "Call me Ishmael.\nAh…é";
  const std::string path = dir.write("moby-dick/moby-dick.txt", text);
  const TextSplit split = load_moby_dick(dir.path());
  CHECK(split.characters == 21);
  CHECK(split.validation_characters == 2);
  CHECK(split.validation == "…é");
  CHECK(split.train == "Call me Ishmael.\nAh");
  CHECK(split.train + split.validation == text);

  // 9 code points: 9 / 10 rounds down to no validation text at all.
  const TextSplit tiny = read_moby_dick(dir.write("tiny.txt", "whale ⚓!\n"));
  CHECK(tiny.characters == 9);
  CHECK(tiny.validation.empty());
  CHECK(tiny.train == "whale ⚓!\n");
}

TEST_CASE("moby dick: missing, empty and invalid UTF-8 files are refused") {
  ScratchDir dir("datasets");
  CHECK_THROWS_WITH_ALL(load_moby_dick(dir.path()), "read_moby_dick: ", "moby-dick/moby-dick.txt not found",
                        "run: bash scripts/fetch_data.sh moby-dick");
  CHECK_THROWS_WITH_ALL(read_moby_dick(dir.write("empty.txt", "")), "read_moby_dick", "empty.txt is empty");
  CHECK_THROWS_WITH_ALL(read_moby_dick(dir.write("bad.txt", "one\ntwo\nthree \x80\n")), "read_moby_dick",
                        "bad.txt: line 3", "invalid UTF-8");
}

// --- Cross-validation folds -----------------------------------------------------------------

TEST_CASE("cross_validation_fold: item i is validation in fold i % folds; the folds hold each item out once") {
  const std::vector<int> items{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const FoldSplit<int> first = cross_validation_fold(items, 0, 5);
  CHECK(first.validation == std::vector<int>{0, 5, 10});
  CHECK(first.train == std::vector<int>{1, 2, 3, 4, 6, 7, 8, 9});
  const FoldSplit<int> last = cross_validation_fold(items, 4, 5);
  CHECK(last.validation == std::vector<int>{4, 9});
  CHECK(last.train == std::vector<int>{0, 1, 2, 3, 5, 6, 7, 8, 10});

  std::vector<int> held_out(items.size(), 0);
  for (int64_t fold = 0; fold < 5; ++fold) {
    const FoldSplit<int> split = cross_validation_fold(items, fold, 5);
    CHECK(split.train.size() + split.validation.size() == items.size());
    for (const int item : split.validation) ++held_out[item];
  }
  CHECK(held_out == std::vector<int>(items.size(), 1));

  // Any item type: the sentiment sentences keep their labels.
  const std::vector<LabelledText> sentences{{"good", 1}, {"bad", 0}, {"fine", 1}, {"awful", 0}};
  const auto halves = cross_validation_fold(sentences, 1, 2);
  CHECK(texts(halves.validation) == std::vector<std::string>{"bad", "awful"});
  CHECK(labels(halves.train) == std::vector<int64_t>{1, 1});
}

TEST_CASE("cross_validation_fold: too few folds, a fold out of range and too few items are refused") {
  const std::vector<int> items{1, 2, 3};
  CHECK_THROWS_WITH_ALL(cross_validation_fold(items, 0, 1), "cross_validation_fold", "at least 2 (got 1)");
  CHECK_THROWS_WITH_ALL(cross_validation_fold(items, 3, 3), "cross_validation_fold", "fold 3 is not one of 0..2");
  CHECK_THROWS_WITH_ALL(cross_validation_fold(items, -1, 3), "cross_validation_fold", "fold -1");
  CHECK_THROWS_WITH_ALL(cross_validation_fold(items, 0, 4), "cross_validation_fold", "3 items cannot fill 4 folds");
}
