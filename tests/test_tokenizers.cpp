// Vocabulary, WordTokenizer and CharTokenizer: building from a corpus, special tokens, edge
// cases, save/load round trips, and load_tokenizer on good, corrupt and foreign files.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "helpers.h"
#include "nn/text/bpe.h"
#include "nn/text/char_tokenizer.h"
#include "nn/text/tokenizer.h"
#include "nn/text/vocabulary.h"
#include "nn/text/word_tokenizer.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::text;
using namespace ember::testing;
using Ids = std::vector<int64_t>;
using Words = std::vector<std::string>;

namespace {

const std::vector<std::string> kCorpus = {
    "The cat sat on the mat.",
    "The dog sat on the log!",
    "A cat and a dog, the best friends.",
    "Caf\u00E9 au lait, s'il vous pla\u00EEt.",
};

}  // namespace

TEST_CASE("Vocabulary maps tokens and ids both ways") {
  Vocabulary vocabulary({"[PAD]", "hello", "world"});
  CHECK(vocabulary.size() == 3);
  CHECK(vocabulary.id("world") == 2);
  CHECK(vocabulary.token(1) == "hello");
  CHECK(vocabulary.find("absent") == std::nullopt);
  CHECK(vocabulary.add("new") == 3);
  CHECK(vocabulary.add("hello") == 1);  // already there: same id
  CHECK(vocabulary.size() == 4);
  CHECK_THROWS_WITH_ALL(vocabulary.id("absent"), "'absent'");
  CHECK_THROWS_WITH_ALL(vocabulary.token(4), "id 4", "[0, 4)");
  CHECK_THROWS_WITH_ALL(Vocabulary({"a", "b", "a"}), "'a'", "ids 0 and 2");
}

TEST_CASE("WordTokenizer builds its vocabulary by frequency after the special tokens") {
  const WordTokenizer words = WordTokenizer::train(kCorpus);
  CHECK(words.type() == "word");
  CHECK(words.pad_id() == 0);
  CHECK(words.unk_id() == 1);
  CHECK(words.bos_id() == 2);
  CHECK(words.eos_id() == 3);
  CHECK(words.cls_id() == std::nullopt);
  // "." and "the" (3 times each) first, ties in byte order, then "," the first of those seen twice.
  CHECK(words.id_to_token(4) == ".");
  CHECK(words.id_to_token(5) == "the");
  CHECK(words.id_to_token(6) == ",");
  CHECK(words.tokenize("The cat's mat!") == Words{"The", "cat", "'", "s", "mat", "!"});
  const Ids ids = words.encode("the cat sat");
  CHECK(words.ids_to_tokens(ids) == Words{"the", "cat", "sat"});
}

TEST_CASE("WordTokenizer: minimum frequency, maximum size, lower-casing, unknown words") {
  WordTokenizerOptions options;
  options.min_frequency = 2;
  options.lowercase = true;
  const WordTokenizer words = WordTokenizer::train(kCorpus, options);
  CHECK(words.lowercase());
  CHECK(words.contains("the"));
  CHECK_FALSE(words.contains("The"));
  CHECK(words.contains("dog"));        // twice
  CHECK_FALSE(words.contains("log"));  // once
  const int64_t unk = *words.unk_id();
  CHECK(words.encode("THE LOG") == Ids{words.token_to_id("the"), unk});
  CHECK(words.encode("zebra xylophone") == Ids{unk, unk});

  options.max_vocab_size = 6;
  const WordTokenizer small = WordTokenizer::train(kCorpus, options);
  CHECK(small.vocab_size() == 6);
  CHECK(small.id_to_token(4) == "the");

  options.max_vocab_size = 3;
  CHECK_THROWS_WITH_ALL(WordTokenizer::train(kCorpus, options), "max_vocab_size 3", "4 special tokens");
  options.max_vocab_size = std::nullopt;
  options.min_frequency = 0;
  CHECK_THROWS_WITH_ALL(WordTokenizer::train(kCorpus, options), "min_frequency");
}

TEST_CASE("WordTokenizer edge cases: empty text, only punctuation, non-ASCII, controls") {
  const WordTokenizer words = WordTokenizer::train(kCorpus);
  CHECK(words.encode("").empty());
  CHECK(words.encode(" \t\n").empty());
  CHECK(words.encode("!.,") == Ids{words.token_to_id("!"), words.token_to_id("."), words.token_to_id(",")});
  CHECK(words.encode("Caf\u00E9") == Ids{words.token_to_id("Caf\u00E9")});
  // Emoji, CJK and Cyrillic are words like any other: unknown here.
  const int64_t unk = *words.unk_id();
  CHECK(words.encode("\U0001F600 \u6771\u4EAC \u043C\u0438\u0440") == Ids{unk, unk, unk, unk});
  CHECK(words.encode("the\x01\tcat") == Ids{words.token_to_id("the"), words.token_to_id("cat")});
  CHECK(words.encode("the \xFF") == Ids{words.token_to_id("the"), unk});
  CHECK(words.encode_with_specials("the cat") == Ids{2, words.token_to_id("the"), words.token_to_id("cat"), 3});
}

TEST_CASE("WordTokenizer decode joins words and attaches punctuation") {
  const WordTokenizer words = WordTokenizer::train(kCorpus);
  CHECK(words.decode(words.encode("The cat sat on the mat.")) == "The cat sat on the mat.");
  CHECK(words.decode(words.encode_with_specials("A cat, a dog!")) == "A cat, a dog!");
  CHECK(words.decode(words.encode("s'il")) == "s'il");
  CHECK(words.decode(words.encode("the zebra")) == "the [UNK]");
  CHECK(words.decode({0, 0}) == "");
  CHECK_THROWS_WITH_ALL(words.decode({words.vocab_size()}), "WordTokenizer::decode", "outside the vocabulary");
}

TEST_CASE("WordTokenizer with custom special tokens, or without an unknown token") {
  WordTokenizerOptions options;
  options.specials = SpecialTokens{.pad = "<pad>", .unk = "<unk>", .bos = "<s>", .eos = "</s>"};
  const WordTokenizer words = WordTokenizer::train(kCorpus, options);
  CHECK(words.id_to_token(0) == "<pad>");
  CHECK(words.unk_id() == 1);
  CHECK(words.encode("zebra") == Ids{1});
  // "<pad>" in text is punctuation and letters, never the special token.
  CHECK(words.encode("<pad>") == Ids{1, 1, 1});

  options.specials = SpecialTokens{.pad = "[PAD]", .unk = ""};
  const WordTokenizer strict = WordTokenizer::train(kCorpus, options);
  CHECK(strict.unk_id() == std::nullopt);
  CHECK(strict.encode("the cat") == Ids{strict.token_to_id("the"), strict.token_to_id("cat")});
  CHECK_THROWS_WITH_ALL(strict.encode("the zebra"), "'zebra'", "no unknown token");
}

TEST_CASE("WordTokenizer save and load round trip") {
  ScratchDir dir("tokenizers");
  WordTokenizerOptions options;
  options.lowercase = true;
  options.specials.eos = "";
  const WordTokenizer words = WordTokenizer::train(kCorpus, options);
  const std::string path = dir.file("words.json");
  words.save(path);
  const WordTokenizer loaded = WordTokenizer::load(path);
  CHECK(loaded.vocabulary().tokens() == words.vocabulary().tokens());
  CHECK(loaded.lowercase());
  CHECK(loaded.eos_id() == std::nullopt);
  CHECK(loaded.encode("The DOG sat.") == words.encode("The DOG sat."));
  const std::unique_ptr<Tokenizer> any = load_tokenizer(path);
  CHECK(any->type() == "word");
  CHECK(any->encode("the cat") == words.encode("the cat"));
  CHECK(any->special_tokens().names() == words.special_tokens().names());
}

TEST_CASE("CharTokenizer: the alphabet of a corpus, exact round trips") {
  const CharTokenizer chars = CharTokenizer::train(kCorpus);
  CHECK(chars.type() == "char");
  CHECK(chars.unk_id() == 1);
  // After the 4 special tokens, the alphabet in code point order: space first.
  CHECK(chars.id_to_token(4) == " ");
  for (const std::string& line : kCorpus) CHECK(chars.decode(chars.encode(line)) == line);
  CHECK(chars.encode("\u00E9").size() == 1);
  CHECK(chars.encode("").empty());
  CHECK(chars.decode(chars.encode_with_specials("cat")) == "cat");
  const int64_t unk = *chars.unk_id();
  CHECK(chars.encode("c\U0001F600t") == Ids{chars.token_to_id("c"), unk, chars.token_to_id("t")});
  CHECK(chars.decode(chars.encode("c\u6771t")) == "c[UNK]t");
}

TEST_CASE("CharTokenizer: non-ASCII, emoji, minimum frequency, no unknown token") {
  const std::vector<std::string> corpus = {"\u6771\u4EAC \U0001F600\U0001F600 \u043C\u0438\u0440 aab"};
  const CharTokenizer chars = CharTokenizer::train(corpus);
  CHECK(chars.decode(chars.encode(corpus[0])) == corpus[0]);
  CHECK(chars.encode("\U0001F600") == Ids{chars.token_to_id("\U0001F600")});

  CharTokenizerOptions options;
  options.min_frequency = 2;
  options.specials = SpecialTokens::none();
  const CharTokenizer frequent = CharTokenizer::train(corpus, options);
  CHECK(frequent.vocabulary().tokens() == Words{" ", "a", "\U0001F600"});
  CHECK(frequent.encode("a a") == Ids{1, 0, 1});
  CHECK_THROWS_WITH_ALL(frequent.encode("aab"), "'b'", "U+0062", "byte offset 2", "no unknown token");
  CHECK_THROWS_WITH_ALL(frequent.encode("a\xFF"), "U+FFFD", "byte offset 1");
  CHECK_THROWS_WITH_ALL(frequent.encode_with_specials("a"), "start token");
}

TEST_CASE("CharTokenizer save and load round trip") {
  ScratchDir dir("tokenizers");
  const CharTokenizer chars = CharTokenizer::train(kCorpus);
  const std::string path = dir.file("chars.json");
  chars.save(path);
  const CharTokenizer loaded = CharTokenizer::load(path);
  CHECK(loaded.vocabulary().tokens() == chars.vocabulary().tokens());
  CHECK(loaded.encode(kCorpus[3]) == chars.encode(kCorpus[3]));
  const std::unique_ptr<Tokenizer> any = load_tokenizer(path);
  CHECK(any->type() == "char");
  CHECK(any->decode(any->encode(kCorpus[3])) == kCorpus[3]);
}

TEST_CASE("load_tokenizer refuses missing, corrupt and foreign files, naming the path and the key") {
  ScratchDir dir("tokenizers");
  const std::string path = dir.file("tokenizer.json");
  CHECK_THROWS_WITH_ALL(load_tokenizer(path), "cannot open", path.c_str());

  write_text_file(path, "{\"type\": \"word\", ");
  CHECK_THROWS_WITH_ALL(load_tokenizer(path), path.c_str(), "not valid JSON");
  write_text_file(path, "[1, 2, 3]");
  CHECK_THROWS_WITH_ALL(load_tokenizer(path), path.c_str(), "not an object");
  write_text_file(path, "{\"model\": {\"vocab\": {}}}");  // some other program's tokenizer file
  CHECK_THROWS_WITH_ALL(load_tokenizer(path), path.c_str(), "'type'", "missing");
  write_text_file(path, "{\"type\": \"sentencepiece\"}");
  CHECK_THROWS_WITH_ALL(load_tokenizer(path), path.c_str(), "'sentencepiece'");

  const WordTokenizer words = WordTokenizer::train(kCorpus);
  words.save(path);
  const nlohmann::json saved = nlohmann::json::parse(read_text_file(path));
  const auto check_broken = [&](nlohmann::json document, const char* key, const char* problem) {
    write_text_file(path, document.dump());
    CHECK_THROWS_WITH_ALL(load_tokenizer(path), path.c_str(), key, problem);
  };
  nlohmann::json broken = saved;
  broken["version"] = 7;
  check_broken(broken, "'version'", "7");
  broken = saved;
  broken.erase("special_tokens");
  check_broken(broken, "'special_tokens'", "missing");
  broken = saved;
  broken["special_tokens"]["unk"] = 3;
  check_broken(broken, "'special_tokens.unk'", "string");
  broken = saved;
  broken["special_tokens"]["unk"] = "[NOT THERE]";
  check_broken(broken, "'vocabulary'", "[NOT THERE]");
  broken = saved;
  broken["vocabulary"][5] = 42;
  check_broken(broken, "'vocabulary'", "element 5");
  broken = saved;
  broken["vocabulary"][5] = broken["vocabulary"][6];
  check_broken(broken, "'vocabulary'", "twice");
  // With its type changed and its word-only key removed, the file is a valid char tokenizer.
  broken = saved;
  broken["type"] = "char";
  broken.erase("lowercase");
  write_text_file(path, broken.dump());
  CHECK(load_tokenizer(path)->type() == "char");
}

TEST_CASE("a tokenizer file with a number beyond double's range is refused as invalid JSON") {
  // The JSON parser reports such a number with an exception of its own (out_of_range, not
  // parse_error), which once escaped every tokenizer loader as a foreign exception.
  ScratchDir dir("tokenizers");
  const std::string path = dir.file("tokenizer.json");
  write_text_file(path, R"({"type": "bpe", "version": 1, "merges": [[1e999, 4]]})");
  CHECK_THROWS_WITH_ALL(load_tokenizer(path), "load_tokenizer", path.c_str(), "not valid JSON", "1e999");
  CHECK_THROWS_WITH_ALL(BpeTokenizer::load(path), "BpeTokenizer::load", path.c_str(), "not valid JSON");
  write_text_file(path, R"(["[UNK]", -1e999])");
  CHECK_THROWS_WITH_ALL(WordPieceTokenizer::from_bert_vocab_json(path), "from_bert_vocab_json", path.c_str(),
                        "not valid JSON");
}

TEST_CASE("a tokenizer file nested a hundred thousand levels deep is refused, not a stack overflow") {
  // Parsing such JSON works, but writing a value of it back (for an error message) recursed once
  // per level and overflowed the stack.
  ScratchDir dir("tokenizers");
  const std::string path = dir.file("tokenizer.json");
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  write_text_file(path, R"({"type": "bpe", "version": 1, "special_tokens": {"pad": "[PAD]", "unk": "[UNK]",
    "bos": "[BOS]", "eos": "[EOS]"}, "merges": [)" + deep + "]}");
  CHECK_THROWS_WITH_ALL(load_tokenizer(path), "load_tokenizer", path.c_str(), "nested deeper than");
  CHECK_THROWS_WITH_ALL(BpeTokenizer::load(path), "BpeTokenizer::load", path.c_str(), "nested deeper than");
}

TEST_CASE("save to an unwritable place throws naming the path") {
  const WordTokenizer words = WordTokenizer::train(kCorpus);
  const std::string path = "/nonexistent-directory/words.json";
  CHECK_THROWS_WITH_ALL(words.save(path), path.c_str());
}
