// Gpt2Tokenizer: GPT-2's byte table, its pre-tokenising pattern, encoding by merge rank (checked
// against the plain definition), exact round trips of any bytes, save/load and the errors for
// malformed files. A small vocabulary written here in GPT-2's file format is always used; the
// real one (data/gpt2-vocab, from `bash scripts/fetch_data.sh gpt2-vocab`) is used when present,
// to check the ids of tests/golden/gpt2_tokens.json, those GPT-2's reference encoder gave.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "helpers.h"
#include "nn/text/gpt2_tokenizer.h"
#include "nn/text/unicode.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::text;
using namespace ember::testing;
using Ids = std::vector<int64_t>;
using Pieces = std::vector<std::string>;

namespace {

// --- a small vocabulary in GPT-2's file format -------------------------------------------------

// The merges of the small vocabulary, in GPT-2's notation ('Ġ' is a space, 'Ċ' a newline).
const std::vector<std::string> kSmallMerges = {"Ġ t",    "h e", "Ġt he", "a t",   "Ġ c",   "Ġc at",   "Ġ s",
                                               "Ġs at",  "o n", "Ġ on",  "Ġ m",   "Ġm at", "l l",     "he ll",
                                               "hell o", "Ġ w", "o r",   "Ġw or", "l d",   "Ġwor ld", "' s",
                                               "Ċ Ċ",    "a a", "a f",   "c af",  "Ã ©",   "caf Ã©"};

std::string notation(std::string_view bytes) {
  std::string out;
  for (unsigned char byte : bytes) append_utf8(out, Gpt2Tokenizer::byte_to_symbol_character(byte));
  return out;
}

// encoder.json of the small vocabulary: the bytes (id = byte value), the merges' results in
// order, then <|endoftext|>; `extra` adds tokens after those.
nlohmann::json small_encoder(const std::vector<std::string>& merges = kSmallMerges) {
  nlohmann::json encoder = nlohmann::json::object();
  int64_t id = 0;
  for (int byte = 0; byte < 256; ++byte) encoder[notation(std::string(1, static_cast<char>(byte)))] = id++;
  for (const std::string& merge : merges) {
    const size_t space = merge.find(' ');
    encoder[merge.substr(0, space) + merge.substr(space + 1)] = id++;
  }
  encoder["<|endoftext|>"] = id++;
  return encoder;
}

std::string small_vocab_bpe(const std::vector<std::string>& merges = kSmallMerges) {
  std::string text = "#version: 0.2\n";
  for (const std::string& merge : merges) text += merge + "\n";
  return text;
}

struct SmallFiles {
  ScratchDir dir{"gpt2_tokenizer"};
  std::string encoder_json;
  std::string vocab_bpe;
  SmallFiles(const nlohmann::json& encoder = small_encoder(), const std::string& merges = small_vocab_bpe()) {
    encoder_json = dir.write("encoder.json", encoder.dump());
    vocab_bpe = dir.write("vocab.bpe", merges);
  }
};

const Gpt2Tokenizer& small_tokenizer() {
  static const Gpt2Tokenizer tokenizer = [] {
    const SmallFiles files;
    return Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe);
  }();
  return tokenizer;
}

// --- the real vocabulary, when fetched ---------------------------------------------------------

std::string real_vocab_dir() {
  const char* data_dir = std::getenv("EMBER_DATA_DIR");
  return (data_dir ? std::string(data_dir) : std::string(EMBER_SOURCE_DIR) + "/data") + "/gpt2-vocab";
}

// GPT-2's tokenizer, or nullptr (and a message saying the cases are skipped) when data/gpt2-vocab
// has not been fetched: the suites run without network.
const Gpt2Tokenizer* real_tokenizer() {
  static const std::unique_ptr<Gpt2Tokenizer> tokenizer = []() -> std::unique_ptr<Gpt2Tokenizer> {
    const std::string dir = real_vocab_dir();
    if (!std::filesystem::exists(dir + "/encoder.json") || !std::filesystem::exists(dir + "/vocab.bpe")) return nullptr;
    return std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load(dir + "/encoder.json", dir + "/vocab.bpe"));
  }();
  if (!tokenizer) {
    MESSAGE("skipped: GPT-2's vocabulary is not in " << real_vocab_dir()
                                                     << " (bash scripts/fetch_data.sh gpt2-vocab fetches it)");
  }
  return tokenizer.get();
}

// The plain definition of GPT-2's merging, on strings: while some adjacent pair is a merge, join
// every occurrence of the lowest-ranked one, left to right.
Pieces plain_merge(const Gpt2Tokenizer& tokenizer, std::string_view piece) {
  struct Merges {
    std::vector<std::pair<std::string, std::string>> in_order;
    std::map<std::pair<std::string, std::string>, size_t> rank_of;
  };
  static std::map<const Gpt2Tokenizer*, Merges> merges_of;
  Merges& merges = merges_of[&tokenizer];
  if (merges.in_order.empty()) {
    merges.in_order = tokenizer.merges();
    for (size_t rank = 0; rank < merges.in_order.size(); ++rank) merges.rank_of.emplace(merges.in_order[rank], rank);
  }
  Pieces symbols;
  for (unsigned char byte : piece) symbols.push_back(notation(std::string(1, static_cast<char>(byte))));
  while (symbols.size() > 1) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto found = merges.rank_of.find({symbols[i], symbols[i + 1]});
      if (found != merges.rank_of.end()) best = std::min(best, found->second);
    }
    if (best == SIZE_MAX) break;
    const auto& [left, right] = merges.in_order[best];
    Pieces merged;
    for (size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        merged.push_back(left + right);
        i += 2;
      } else {
        merged.push_back(symbols[i++]);
      }
    }
    symbols = std::move(merged);
  }
  return symbols;
}

Pieces plain_tokens(const Gpt2Tokenizer& tokenizer, std::string_view text) {
  Pieces tokens;
  for (const std::string& piece : Gpt2Tokenizer::pre_tokenize(text)) {
    for (std::string& token : plain_merge(tokenizer, piece)) tokens.push_back(std::move(token));
  }
  return tokens;
}

// Random byte strings: mostly text-like bytes, with malformed UTF-8 (stray continuation bytes,
// truncated sequences, 0xFF) mixed in.
std::string random_bytes(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {"a",
                                                  "the",
                                                  " ",
                                                  "  ",
                                                  "\n",
                                                  "\t",
                                                  "'s",
                                                  "'S",
                                                  "!",
                                                  "1",
                                                  "\xC3\xA9",
                                                  "\xE4\xB8\xAD",
                                                  "\xF0\x9F\x98\x80",
                                                  "\x80",
                                                  "\xFF",
                                                  "\xC3",
                                                  "\xE4\xB8",
                                                  "\xF0\x9F",
                                                  "\xED\xA0\x80",
                                                  "\xC0\xAF",
                                                  "\xEF\xBF\xBD",
                                                  "\xC2\xA0",
                                                  "\0"};
  std::string text;
  const int length = std::uniform_int_distribution<int>(0, 24)(rng);
  for (int i = 0; i < length; ++i) {
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
      text.push_back(static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng)));
    } else {
      text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
    }
  }
  return text;
}

}  // namespace

TEST_CASE("GPT-2's byte table: printable Latin-1 bytes stand for themselves, the other 68 for U+0100 on") {
  CHECK(Gpt2Tokenizer::byte_to_symbol_character('a') == U'a');
  CHECK(Gpt2Tokenizer::byte_to_symbol_character('!') == U'!');
  CHECK(Gpt2Tokenizer::byte_to_symbol_character(0xE9) == U'\u00E9');
  CHECK(Gpt2Tokenizer::byte_to_symbol_character(0) == U'\u0100');
  CHECK(Gpt2Tokenizer::byte_to_symbol_character(' ') == U'\u0120');   // Ġ
  CHECK(Gpt2Tokenizer::byte_to_symbol_character('\n') == U'\u010A');  // Ċ
  CHECK(Gpt2Tokenizer::byte_to_symbol_character(0x7F) == U'\u0121');
  CHECK(Gpt2Tokenizer::byte_to_symbol_character(0xAD) == U'\u0143');  // the soft hyphen, the 68th
  std::set<char32_t> characters;
  int moved = 0;
  for (int byte = 0; byte < 256; ++byte) {
    const char32_t c = Gpt2Tokenizer::byte_to_symbol_character(static_cast<unsigned char>(byte));
    characters.insert(c);
    if (c != static_cast<char32_t>(byte)) {
      ++moved;
      CHECK(c >= 0x100);
      CHECK(c < 0x100 + 68);
    }
  }
  CHECK(characters.size() == 256);
  CHECK(moved == 68);
}

TEST_CASE("pre_tokenize follows GPT-2's pattern, contractions and the whitespace rules included") {
  const auto pieces = [](std::string_view text) { return Gpt2Tokenizer::pre_tokenize(text); };
  CHECK(pieces("").empty());
  CHECK(pieces("Hello world") == Pieces{"Hello", " world"});
  CHECK(pieces("it's they're we'll I'd I'm you've don't") ==
        Pieces{"it", "'s", " they", "'re", " we", "'ll", " I", "'d", " I", "'m", " you", "'ve", " don", "'t"});
  // Upper-case contractions are not in the pattern: the apostrophe is punctuation.
  CHECK(pieces("IT'S") == Pieces{"IT", "'", "S"});
  CHECK(pieces("''s") == Pieces{"''", "s"});
  CHECK(pieces("'sss") == Pieces{"'s", "ss"});
  // Runs of letters, numbers and other characters, each with at most one space in front.
  CHECK(pieces("abc123!?def") == Pieces{"abc", "123", "!?", "def"});
  CHECK(pieces(" 42 !! x") == Pieces{" 42", " !!", " x"});
  CHECK(pieces("caf\u00e9 \u4f60\u597d") == Pieces{"caf\u00e9", " \u4f60\u597d"});
  // A whitespace run gives its last character to the piece after it, unless it ends the text.
  CHECK(pieces("a   b") == Pieces{"a", "  ", " b"});
  CHECK(pieces("a\n\nb") == Pieces{"a", "\n", "\n", "b"});
  CHECK(pieces("a \n b") == Pieces{"a", " \n", " b"});
  CHECK(pieces("a\t\tb") == Pieces{"a", "\t", "\t", "b"});
  CHECK(pieces("a\tb") == Pieces{"a", "\t", "b"});
  CHECK(pieces("trailing  ") == Pieces{"trailing", "  "});
  CHECK(pieces("  leading") == Pieces{" ", " leading"});
  CHECK(pieces("\n\n") == Pieces{"\n\n"});
  // JavaScript's \s: the no-break and ideographic spaces and U+FEFF are whitespace, U+0085 is not.
  CHECK(pieces("x\u3000\u3000y") == Pieces{"x", "\u3000", "\u3000", "y"});
  CHECK(pieces("\ufeffx") == Pieces{"\ufeff", "x"});
  CHECK(pieces("x\u0085y") == Pieces{"x", "\u0085", "y"});
  // Only U+0020 joins the piece after it.
  CHECK(pieces("x\u00a0y") == Pieces{"x", "\u00a0", "y"});
  // Numbers in other scripts are \p{N}; combining marks are neither letters nor numbers.
  CHECK(pieces("\u00bd\u0663x") == Pieces{"\u00bd\u0663", "x"});
  CHECK(pieces("e\u0301") == Pieces{"e", "\u0301"});
  // A malformed byte is a character of the "other" class, like U+FFFD.
  CHECK(pieces("a\xff\xfe b") == Pieces{"a", "\xff\xfe", " b"});
  CHECK(pieces("a \x80!") == Pieces{"a", " \x80!"});
}

TEST_CASE("the small vocabulary: merges by rank, every occurrence left to right") {
  const Gpt2Tokenizer& gpt2 = small_tokenizer();
  CHECK(gpt2.vocab_size() == 256 + static_cast<int64_t>(kSmallMerges.size()) + 1);
  CHECK(gpt2.end_of_text_id() == gpt2.vocab_size() - 1);
  CHECK(gpt2.type() == "gpt2");
  CHECK(gpt2.ids_to_tokens(gpt2.encode("the cat sat on the mat")) ==
        Pieces{"t", "he", "Ġcat", "Ġsat", "Ġon", "Ġthe", "Ġmat"});
  CHECK(gpt2.ids_to_tokens(gpt2.encode("hello world's")) == Pieces{"hello", "Ġworld", "'s"});
  CHECK(gpt2.ids_to_tokens(gpt2.encode("aaa")) == Pieces{"aa", "a"});
  CHECK(gpt2.ids_to_tokens(gpt2.encode("aaaa")) == Pieces{"aa", "aa"});
  CHECK(gpt2.ids_to_tokens(gpt2.encode("\n\n\n")) == Pieces{"ĊĊ", "Ċ"});
  CHECK(gpt2.ids_to_tokens(gpt2.encode("caf\u00e9")) == Pieces{"caf\u00c3\u00a9"});
  CHECK(gpt2.token_to_id("Ġthe") == 256 + 2);
  CHECK(gpt2.decode(gpt2.encode("the cat sat on the mat")) == "the cat sat on the mat");
  std::mt19937 rng(38);
  const std::string alphabet = "the cat sat on mat hello world's aaa\n\n";
  for (int trial = 0; trial < 500; ++trial) {
    std::string text;
    for (int i = std::uniform_int_distribution<int>(0, 30)(rng); i > 0; --i) {
      text.push_back(alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)]);
    }
    CAPTURE(text);
    CHECK(gpt2.ids_to_tokens(gpt2.encode(text)) == plain_tokens(gpt2, text));
  }
}

TEST_CASE("<|endoftext|> is never made from text, begins and ends sequences, and decode skips it") {
  const Gpt2Tokenizer& gpt2 = small_tokenizer();
  const Ids ids = gpt2.encode("<|endoftext|>");
  CHECK(std::find(ids.begin(), ids.end(), gpt2.end_of_text_id()) == ids.end());
  CHECK(gpt2.decode(ids) == "<|endoftext|>");
  CHECK(gpt2.bos_id() == gpt2.end_of_text_id());
  CHECK(gpt2.eos_id() == gpt2.end_of_text_id());
  CHECK(!gpt2.pad_id());
  CHECK(!gpt2.unk_id());
  const Ids with_specials = gpt2.encode_with_specials("the cat");
  CHECK(with_specials.front() == gpt2.end_of_text_id());
  CHECK(with_specials.back() == gpt2.end_of_text_id());
  CHECK(gpt2.decode(with_specials) == "the cat");
}

TEST_CASE("decode(encode(s)) == s for any bytes, malformed UTF-8 included") {
  const Gpt2Tokenizer& small = small_tokenizer();
  const Gpt2Tokenizer* real = real_tokenizer();
  std::mt19937 rng(2019);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string text = random_bytes(rng);
    CAPTURE(to_valid_utf8(text));
    CHECK(small.decode(small.encode(text)) == text);
    if (real) CHECK(real->decode(real->encode(text)) == text);
  }
  std::string every_byte;
  for (int byte = 0; byte < 256; ++byte) every_byte.push_back(static_cast<char>(byte));
  CHECK(small.decode(small.encode(every_byte)) == every_byte);
  if (real) CHECK(real->decode(real->encode(every_byte)) == every_byte);
}

TEST_CASE("encode is safe from several threads at once") {
  // Two tokenizers loaded apart, so that the threads start from an empty cache of their own.
  const SmallFiles files;
  const Gpt2Tokenizer reference = Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe);
  const Gpt2Tokenizer gpt2 = Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe);
  std::vector<std::string> texts;
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) texts.push_back(random_bytes(rng));
  std::vector<Ids> expected;
  for (const std::string& text : texts) expected.push_back(reference.encode(text));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (gpt2.encode(texts[(i + t * 37) % texts.size()]) != expected[(i + t * 37) % texts.size()]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("save and load round trip") {
  const Gpt2Tokenizer& gpt2 = small_tokenizer();
  const ScratchDir dir("gpt2_tokenizer");
  gpt2.save(dir.file("gpt2.json"));
  const Gpt2Tokenizer loaded = Gpt2Tokenizer::load(dir.file("gpt2.json"));
  CHECK(loaded.vocabulary().tokens() == gpt2.vocabulary().tokens());
  CHECK(loaded.merges() == gpt2.merges());
  CHECK(loaded.encode("hello world, the cat\n\n") == gpt2.encode("hello world, the cat\n\n"));

  nlohmann::json saved = nlohmann::json::parse(read_text_file(dir.file("gpt2.json")));
  saved["type"] = "bpe";
  write_text_file(dir.file("wrong_type.json"), saved.dump());
  CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(dir.file("wrong_type.json")), "Gpt2Tokenizer::load", "key 'type'", "gpt2");
  saved["type"] = "gpt2";
  saved["merges"][3] = "a b c";
  write_text_file(dir.file("bad_merge.json"), saved.dump());
  CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(dir.file("bad_merge.json")), "key 'merges'", "element 3",
                        "two symbols separated by one space");
}

TEST_CASE("malformed GPT-2 files throw, naming the tokenizer, the file and the line or key") {
  const std::string who = "Gpt2Tokenizer::load";
  {
    const SmallFiles files;
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.dir.file("missing.json"), files.vocab_bpe), who.c_str(),
                          "missing.json", "cannot open");
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.dir.file("missing.bpe")), who.c_str(),
                          "missing.bpe", "cannot open");
    const std::string not_json = files.dir.write("bad.json", "{\"a\": 1,");
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(not_json, files.vocab_bpe), who.c_str(), "bad.json", "not valid JSON");
    const std::string array = files.dir.write("array.json", "[1, 2]");
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(array, files.vocab_bpe), who.c_str(), "array.json", "JSON object");
  }
  {
    nlohmann::json encoder = small_encoder();
    encoder["hello"] = "five";
    const SmallFiles files(encoder);
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "key 'hello'",
                          "should have an id in [0, ");
  }
  {
    nlohmann::json encoder = small_encoder();
    encoder["hello"] = 5;  // the id of byte 5
    const SmallFiles files(encoder);
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "has id 5", "has too");
  }
  {
    nlohmann::json encoder = small_encoder();
    encoder["zebra"] = static_cast<int64_t>(encoder.size());  // a token no merge makes: 1 too many
    const SmallFiles files(encoder);
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), who.c_str(), "encoder.json",
                          "tokens, but the 256 bytes", "50257");
  }
  {
    nlohmann::json encoder = small_encoder();
    encoder.erase("<|endoftext|>");
    const SmallFiles files(encoder);
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "has no token '<|endoftext|>'");
  }
  {
    nlohmann::json encoder = small_encoder();
    const int64_t id = encoder["Ġ"];
    encoder.erase("Ġ");
    encoder[" "] = id;  // a raw space: no byte's character in GPT-2's notation
    const SmallFiles files(encoder);
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "token ' '", "U+0020",
                          "stands for no byte");
  }
  {
    // The merges refer to "zz", which encoder.json lacks.
    const std::vector<std::string> merges = {"Ġ t", "z z", "zz z"};
    nlohmann::json encoder = small_encoder({"Ġ t", "z z"});
    const SmallFiles files(encoder, small_vocab_bpe(merges));
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), who.c_str(), "vocab.bpe", "line 4",
                          "the merged symbol 'zzz' is not a token");
  }
  {
    nlohmann::json encoder = small_encoder({"Ġ t"});
    const SmallFiles files(encoder, small_vocab_bpe({"Ġ t", "q Ġq"}));
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "line 3",
                          "symbol 'Ġq' is not a token");
  }
  {
    // "Ġt he" before "h e" makes "he": a merge that uses a symbol before it exists.
    const std::vector<std::string> merges = {"Ġ t", "Ġt he", "h e"};
    const SmallFiles files(small_encoder(merges), small_vocab_bpe(merges));
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "line 3", "symbol 'he'",
                          "used before any merge makes it");
  }
  {
    const std::vector<std::string> merges = {"a b", "ab c", "b c", "a bc"};  // "abc" made twice
    nlohmann::json encoder = small_encoder({"a b", "ab c", "b c"});
    encoder["filler"] = static_cast<int64_t>(encoder.size());
    const SmallFiles files(encoder, small_vocab_bpe(merges));
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "line 5", "makes 'abc'",
                          "line 3 already makes");
  }
  {
    const SmallFiles files(small_encoder(), "Ġ t\n");
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "line 1", "#version");
  }
  {
    const SmallFiles files(small_encoder(), "#version: 0.2\nĠ t\nhe\n");
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "vocab.bpe", "line 3",
                          "two symbols separated by one space");
  }
  {
    nlohmann::json encoder = small_encoder();
    encoder.erase(notation("\xff"));
    encoder["\u00ff\u00ff"] = 255;  // byte 0xFF's token replaced by another
    const SmallFiles files(encoder);
    CHECK_THROWS_WITH_ALL(Gpt2Tokenizer::load(files.encoder_json, files.vocab_bpe), "has no token", "byte 0xFF");
  }
}

TEST_CASE("decode refuses ids outside the vocabulary") {
  const Gpt2Tokenizer& gpt2 = small_tokenizer();
  CHECK_THROWS_WITH_ALL(gpt2.decode({1, gpt2.vocab_size()}), "Gpt2Tokenizer::decode", "position 1",
                        "outside the vocabulary");
  CHECK_THROWS_WITH_ALL(gpt2.decode({-1}), "Gpt2Tokenizer::decode", "id -1");
}

// --- GPT-2's own vocabulary, when fetched ----------------------------------------------------------

TEST_CASE("GPT-2's vocabulary: 50,257 tokens, <|endoftext|> last, familiar ids") {
  const Gpt2Tokenizer* gpt2 = real_tokenizer();
  if (!gpt2) return;
  CHECK(gpt2->vocab_size() == Gpt2Tokenizer::kGpt2VocabSize);
  CHECK(gpt2->end_of_text_id() == 50256);
  CHECK(gpt2->merges().size() == 50000);
  CHECK(gpt2->encode("Hello world") == Ids{15496, 995});
  CHECK(gpt2->token_to_id("Ġthe") == 262);
  CHECK(gpt2->decode({15496, 995, 50256}) == "Hello world");
}

TEST_CASE("GPT-2's vocabulary: the ids of GPT-2's reference encoder for every golden string") {
  const Gpt2Tokenizer* gpt2 = real_tokenizer();
  if (!gpt2) return;
  const nlohmann::json golden =
      nlohmann::json::parse(read_text_file(std::string(EMBER_SOURCE_DIR) + "/tests/golden/gpt2_tokens.json"));
  const nlohmann::json& cases = golden.at("cases");
  REQUIRE(cases.size() >= 2000);
  int mismatches = 0;
  for (const nlohmann::json& entry : cases) {
    const std::string text = entry.at(0).get<std::string>();
    const Ids expected = entry.at(1).get<Ids>();
    const Ids ids = gpt2->encode(text);
    if (ids != expected && ++mismatches <= 10) {
      CAPTURE(text);
      CHECK(ids == expected);
    }
    CHECK(gpt2->decode(ids) == text);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("GPT-2's vocabulary: encoding by heap equals the plain merge loop") {
  const Gpt2Tokenizer* gpt2 = real_tokenizer();
  if (!gpt2) return;
  std::mt19937 rng(50256);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_bytes(rng);
    CAPTURE(to_valid_utf8(text));
    CHECK(gpt2->ids_to_tokens(gpt2->encode(text)) == plain_tokens(*gpt2, text));
  }
}

TEST_CASE("GPT-2's vocabulary: a malformed byte is encoded as itself, where the reference sees U+FFFD") {
  const Gpt2Tokenizer* gpt2 = real_tokenizer();
  if (!gpt2) return;
  // Node turns the byte 0xFF into U+FFFD (EF BF BD) before GPT-2's encoder sees it; ember keeps
  // the byte, so that decoding gives back the input.
  const Ids ids = gpt2->encode(
      "a\xff"
      "b");
  CHECK(ids == Ids{64, gpt2->token_to_id("\u00ff"), 65});
  CHECK(gpt2->decode(ids) ==
        "a\xff"
        "b");
  // Both are pieces of the "other" class, so the pieces are where the reference's are.
  CHECK(Gpt2Tokenizer::pre_tokenize("x \xff!y") == Pieces{"x", " \xff!", "y"});
  CHECK(Gpt2Tokenizer::pre_tokenize("x \xef\xbf\xbd!y") == Pieces{"x", " \xef\xbf\xbd!", "y"});
}
