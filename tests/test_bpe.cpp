// BpeTokenizer: pre-splitting, training to the asked vocabulary size, repeatable merges, encoding
// by merge rank (checked against a plain reference), no input ever unknown, exact round trips,
// save/load and bad files.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "helpers.h"
#include "nn/text/bpe.h"
#include "nn/text/tokenizer.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::text;
using namespace ember::testing;
using Ids = std::vector<int64_t>;
using Pieces = std::vector<std::string>;

namespace {

// A little German and English, with accents, repeated words and punctuation.
const std::vector<std::string> kCorpus = {
    "Die Insel ist voll von Sommerg\u00E4sten.",
    "Summer visitors throng the island.",
    "Das ist ein kleiner Test.",
    "This is a small test.",
    "Der Hund schl\u00E4ft unter dem Tisch.",
    "The dog sleeps under the table.",
    "Ist das dein Hund? Ja, das ist mein Hund!",
    "Is that your dog? Yes, that is my dog!",
    "Die Kinder spielen im Garten, w\u00E4hrend die Sonne scheint.",
    "The children play in the garden while the sun is shining.",
};

// Strings no training corpus prepares for: other scripts, emoji, controls, malformed bytes,
// every byte value, odd whitespace.
std::vector<std::string> unusual_texts() {
  std::string all_bytes;
  for (int byte = 0; byte < 256; ++byte) all_bytes.push_back(static_cast<char>(byte));
  return {"",
          " ",
          "   leading and trailing   ",
          "tabs\tand\nnewlines\r\n\n",
          "\u6771\u4EAC\u306F\u65E5\u672C\u306E\u9996\u90FD\u3067\u3059\u3002",
          "\u041F\u0440\u0438\u0432\u0435\u0442, \u043C\u0438\u0440!",
          "\U0001F600\U0001F44D\U0001F3FD emoji \u2764\uFE0F",
          "caf\u00E9 vs cafe\u0301",
          "\x01\x02 control \x7F",
          "broken \xE2\x82 utf-8 \xFF\xFE",
          "!!!???...,,,",
          std::string(3000, 'z'),
          all_bytes};
}

// Encoding as the definition says: start from bytes, and while some adjacent pair has a merge,
// merge every occurrence of the pair of lowest rank, left to right.
Ids reference_encode(const BpeTokenizer& bpe, const std::string& text) {
  std::map<std::pair<int64_t, int64_t>, int64_t> rank;
  for (size_t i = 0; i < bpe.merges().size(); ++i) rank.emplace(bpe.merges()[i], static_cast<int64_t>(i));
  Ids all;
  for (const std::string& piece : BpeTokenizer::pre_split(text)) {
    Ids symbols;
    for (unsigned char byte : piece) symbols.push_back(BpeTokenizer::kFirstByteId + byte);
    while (true) {
      int64_t best = -1;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto found = rank.find({symbols[i], symbols[i + 1]});
        if (found != rank.end() && (best < 0 || found->second < best)) best = found->second;
      }
      if (best < 0) break;
      const auto [left, right] = bpe.merges()[static_cast<size_t>(best)];
      const int64_t merged = bpe.token_to_id(bpe.id_to_token(left) + bpe.id_to_token(right));
      Ids next;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(symbols[i]);
        }
      }
      symbols = next;
    }
    all.insert(all.end(), symbols.begin(), symbols.end());
  }
  return all;
}

}  // namespace

TEST_CASE("pre_split: words, punctuation runs and whitespace, a single space leading the next word") {
  CHECK(BpeTokenizer::pre_split("Hello, world!  How are\tyou?") ==
        Pieces{"Hello", ",", " world", "!", " ", " How", " are", "\t", "you", "?"});
  CHECK(BpeTokenizer::pre_split("") == Pieces{});
  CHECK(BpeTokenizer::pre_split(" ") == Pieces{" "});
  CHECK(BpeTokenizer::pre_split("a ...") == Pieces{"a", " ..."});
  CHECK(BpeTokenizer::pre_split("Sommerg\u00E4sten.") == Pieces{"Sommerg\u00E4sten", "."});
  CHECK(BpeTokenizer::pre_split("x \xFF") == Pieces{"x", " \xFF"});
  for (const std::string& text : unusual_texts()) {
    std::string joined;
    for (const std::string& piece : BpeTokenizer::pre_split(text)) joined += piece;
    CHECK(joined == text);
  }
}

TEST_CASE("BPE has fixed special ids and the 256 bytes as base symbols") {
  const BpeTokenizer bpe = BpeTokenizer::train(kCorpus, BpeTokenizer::kBaseVocabSize);
  CHECK(bpe.type() == "bpe");
  CHECK(bpe.vocab_size() == 260);
  CHECK(bpe.merges().empty());
  CHECK(bpe.pad_id() == 0);
  CHECK(bpe.unk_id() == 1);
  CHECK(bpe.bos_id() == 2);
  CHECK(bpe.eos_id() == 3);
  CHECK(bpe.id_to_token(BpeTokenizer::kFirstByteId + 'a') == "a");
  CHECK(bpe.id_to_token(BpeTokenizer::kFirstByteId) == std::string(1, '\0'));
  CHECK(bpe.encode("ab") == Ids{4 + 'a', 4 + 'b'});
}

TEST_CASE("BPE training reaches the asked vocabulary size and merges frequent pairs first") {
  const BpeTokenizer bpe = BpeTokenizer::train(kCorpus, 300);
  CHECK(bpe.vocab_size() == 300);
  CHECK(bpe.merges().size() >= 40);
  // Frequent words of the corpus became single symbols.
  CHECK(bpe.contains(" the"));
  CHECK(bpe.contains(" is"));
  CHECK(bpe.encode(" the") == Ids{bpe.token_to_id(" the")});
  // The first merge joins the most frequent pair of bytes within pieces: check it against a
  // direct count of a few common pairs.
  const auto [left, right] = bpe.merges().front();
  const std::string pair = bpe.id_to_token(left) + bpe.id_to_token(right);
  const auto count = [&](const std::string& symbols) {
    int64_t n = 0;
    for (const std::string& text : kCorpus) {
      for (const std::string& piece : BpeTokenizer::pre_split(text)) {
        for (size_t at = piece.find(symbols); at != std::string::npos; at = piece.find(symbols, at + 1)) ++n;
      }
    }
    return n;
  };
  const int64_t best = count(pair);
  for (const std::string& other : {std::string("th"), std::string(" t"), std::string("is"), std::string("en")}) {
    CHECK(count(other) <= best);
  }
}

TEST_CASE("BPE training stops early when no pair is frequent enough") {
  const BpeTokenizer rare = BpeTokenizer::train({"abc"}, 1000);
  CHECK(rare.vocab_size() == 260);  // each pair occurs once, below min_pair_frequency 2
  const BpeTokenizer any_pair = BpeTokenizer::train({"abc"}, 1000, BpeOptions{.min_pair_frequency = 1});
  CHECK(any_pair.vocab_size() == 262);  // ab, then abc
  CHECK(any_pair.encode("abc") == Ids{261});
  CHECK(any_pair.encode("") == Ids{});
  CHECK(BpeTokenizer::train({}, 500).vocab_size() == 260);
}

TEST_CASE("BPE merges are repeatable and do not depend on the corpus order") {
  // 400 is more than this corpus has frequent pairs for: training runs until none is left.
  const BpeTokenizer first = BpeTokenizer::train(kCorpus, 400);
  const BpeTokenizer second = BpeTokenizer::train(kCorpus, 400);
  std::vector<std::string> shuffled = kCorpus;
  std::reverse(shuffled.begin(), shuffled.end());
  const BpeTokenizer reordered = BpeTokenizer::train(shuffled, 400);
  CHECK(first.merges() == second.merges());
  CHECK(first.merges() == reordered.merges());
  CHECK(first.vocabulary().tokens() == reordered.vocabulary().tokens());
}

TEST_CASE("BPE encodes by merge rank, as the plain definition does") {
  // Repetitive text makes overlapping pairs (aaa), long words and many merges.
  std::vector<std::string> corpus = kCorpus;
  std::mt19937 generator(7);
  std::uniform_int_distribution<int> letter(0, 3);
  for (int line = 0; line < 200; ++line) {
    std::string text;
    for (int i = 0; i < 40; ++i) text += (i % 7 == 6) ? ' ' : static_cast<char>('a' + letter(generator));
    corpus.push_back(text);
  }
  const BpeTokenizer bpe = BpeTokenizer::train(corpus, 600, BpeOptions{.min_pair_frequency = 1});
  CHECK(bpe.vocab_size() == 600);
  for (const std::string& text : corpus) CHECK(bpe.encode(text) == reference_encode(bpe, text));
  for (const std::string& text : {std::string("aaaaaaaaaaaaaaaaa"), std::string("abababababcdcdcd dddd")}) {
    CHECK(bpe.encode(text) == reference_encode(bpe, text));
  }
}

TEST_CASE("BPE never produces [UNK] and round-trips any text exactly") {
  const BpeTokenizer bpe = BpeTokenizer::train(kCorpus, 300);
  std::vector<std::string> texts = unusual_texts();
  texts.insert(texts.end(), kCorpus.begin(), kCorpus.end());
  for (const std::string& text : texts) {
    const Ids ids = bpe.encode(text);
    CHECK(std::none_of(ids.begin(), ids.end(), [](int64_t id) { return id < BpeTokenizer::kFirstByteId; }));
    CHECK(std::all_of(ids.begin(), ids.end(), [&](int64_t id) { return id < bpe.vocab_size(); }));
    CHECK(bpe.decode(ids) == text);
    CHECK(bpe.decode(bpe.encode_with_specials(text)) == text);
  }
  CHECK(bpe.encode("").empty());
  CHECK(bpe.encode_with_specials("", 2) == Ids{2, 3});
  CHECK(bpe.encode_with_specials("The dog sleeps.", 3).size() == 3);
  // Seen words take fewer symbols than unseen ones of the same length.
  CHECK(bpe.encode(" the island").size() < bpe.encode(" xqz vwkjyp").size());
}

TEST_CASE("BPE decode writes [UNK] by name and refuses ids outside the vocabulary") {
  const BpeTokenizer bpe = BpeTokenizer::train(kCorpus, 280);
  CHECK(bpe.decode({0, 2, 4 + 'h', 4 + 'i', 1, 3, 0}) == "hi[UNK]");
  CHECK_THROWS_WITH_ALL(bpe.decode({280}), "BpeTokenizer::decode", "280");
  const Pieces symbols = bpe.tokenize("The dog");
  std::string joined;
  for (const std::string& symbol : symbols) joined += symbol;
  CHECK(joined == "The dog");
}

TEST_CASE("BPE encode is safe from several threads at once") {
  const BpeTokenizer bpe = BpeTokenizer::train(kCorpus, 300);
  std::vector<Ids> expected;
  for (const std::string& text : kCorpus) expected.push_back(reference_encode(bpe, text));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        for (size_t i = 0; i < kCorpus.size(); ++i) mismatches[t] += bpe.encode(kCorpus[i]) != expected[i];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("BPE save and load round trip, through load_tokenizer too") {
  ScratchDir dir("bpe");
  const BpeTokenizer bpe = BpeTokenizer::train(kCorpus, 300);
  const std::string path = dir.file("bpe.json");
  bpe.save(path);
  const BpeTokenizer loaded = BpeTokenizer::load(path);
  CHECK(loaded.merges() == bpe.merges());
  CHECK(loaded.vocabulary().tokens() == bpe.vocabulary().tokens());
  for (const std::string& text : unusual_texts()) CHECK(loaded.encode(text) == bpe.encode(text));
  const std::unique_ptr<Tokenizer> any = load_tokenizer(path);
  CHECK(any->type() == "bpe");
  CHECK(any->vocab_size() == 300);
  CHECK(any->decode(any->encode(kCorpus[0])) == kCorpus[0]);
  // The file lists every symbol readably: a lone byte of a multi-byte character as <0xHH>.
  const nlohmann::json document = nlohmann::json::parse(read_text_file(path));
  CHECK(document["tokens"][4 + 0xC3] == "<0xC3>");
  CHECK(document["tokens"][4 + 'a'] == "a");
}

TEST_CASE("BPE refuses bad sizes and corrupt files, naming the path and the key") {
  CHECK_THROWS_WITH_ALL(BpeTokenizer::train(kCorpus, 100), "vocab_size 100", "260");
  CHECK_THROWS_WITH_ALL(BpeTokenizer::train(kCorpus, 300, BpeOptions{.min_pair_frequency = 0}), "min_pair_frequency");

  ScratchDir dir("bpe");
  const std::string path = dir.file("bpe.json");
  BpeTokenizer::train(kCorpus, 280).save(path);
  const nlohmann::json saved = nlohmann::json::parse(read_text_file(path));
  const auto check_broken = [&](const nlohmann::json& document, const char* key, const char* problem) {
    write_text_file(path, document.dump());
    CHECK_THROWS_WITH_ALL(BpeTokenizer::load(path), path.c_str(), key, problem);
    CHECK_THROWS_WITH_ALL(load_tokenizer(path), path.c_str(), key, problem);
  };
  nlohmann::json broken = saved;
  broken["merges"][3] = "ab";
  check_broken(broken, "'merges'", "element 3");
  broken = saved;
  broken["merges"][0] = {4, 279};  // a symbol that does not exist yet
  check_broken(broken, "'merges'", "279");
  broken = saved;
  broken["merges"][0] = {1, 5};  // [UNK] cannot be merged
  check_broken(broken, "'merges'", "special token");
  broken = saved;
  broken["tokens"][270] = "something else";
  check_broken(broken, "'tokens'", "element 270");
  broken = saved;
  broken["tokens"].erase(broken["tokens"].size() - 1);
  check_broken(broken, "'tokens'", "279 symbols");
  broken = saved;
  broken.erase("merges");
  check_broken(broken, "'merges'", "missing");
  broken = saved;
  broken["special_tokens"]["bos"] = "<s>";
  check_broken(broken, "'special_tokens'", "[BOS]");
}
