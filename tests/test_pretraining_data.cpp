// The pretraining data: the State of the Union reader (nn/data/sotu.h) on fixture folders, the
// masked-language-model packing and masking (nn/data/masked_lm.h): BERT's proportions, the
// positions never chosen, repeatability from the seed, and the errors; and the word polarity
// lexicon with its targets (nn/data/word_polarity.h).
#include <map>
#include <numeric>

#include "helpers.h"
#include "nn/data/masked_lm.h"
#include "nn/data/sotu.h"
#include "nn/data/word_polarity.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("read_sotu: one address a file, the president from the name, years divisible by 10 held out") {
  ScratchDir scratch("sotu");
  scratch.write("1790_george_washington_n.txt", "Fellow-Citizens of the Senate and House of Representatives:");
  scratch.write("1791_george_washington_n.txt", "In meeting you again\nI feel much satisfaction.");
  scratch.write("1961_dwight_d_eisenhower_r.txt", "The last one.");
  scratch.write("1961_john_f_kennedy_d.txt", "The first one.");
  scratch.write("1961_john_f_kennedy_d.json", "{}");  // metadata beside each address: not read
  const datasets::SotuData data = datasets::read_sotu(scratch.path());
  REQUIRE(data.train.size() == 3);
  REQUIRE(data.held_out.size() == 1);
  CHECK(data.held_out[0].year == 1790);
  CHECK(data.held_out[0].president == "george washington");
  CHECK(data.train[0].text == "In meeting you again\nI feel much satisfaction.");
  CHECK(data.train[1].president == "dwight d eisenhower");
  CHECK(data.train[2].president == "john f kennedy");  // two addresses in 1961, both kept
  CHECK(data.words == 8 + 8 + 3 + 3);
}

TEST_CASE("read_sotu: a missing folder, a badly named file, invalid UTF-8 and an empty address are errors") {
  ScratchDir scratch("sotu_errors");
  CHECK_THROWS_WITH_AS(datasets::read_sotu(scratch.file("absent")), doctest::Contains("fetch_data.sh sotu"), Error);
  CHECK_THROWS_WITH_AS(datasets::read_sotu(scratch.path()), doctest::Contains("holds no .txt file"), Error);
  scratch.write("washington.txt", "text");
  CHECK_THROWS_WITH_AS(datasets::read_sotu(scratch.path()), doctest::Contains("washington.txt is not named YEAR_"),
                       Error);
  std::filesystem::remove(scratch.file("washington.txt"));
  scratch.write("1800_john_adams_f.txt", "fine\nbroken \xC3\x28 here");
  CHECK_THROWS_WITH_AS(datasets::read_sotu(scratch.path()), doctest::Contains("line 2"), Error);
  scratch.write("1800_john_adams_f.txt", " \n\t ");
  CHECK_THROWS_WITH_AS(datasets::read_sotu(scratch.path()), doctest::Contains("is empty"), Error);
}

TEST_CASE("pack_sequences: [CLS] text [SEP] of one length, documents run on with [SEP] between them") {
  const std::vector<std::vector<int64_t>> documents = {{10, 11, 12}, {}, {20, 21, 22, 23, 24}, {30}};
  const auto sequences = datasets::pack_sequences(documents, 5, /*cls_id=*/1, /*sep_id=*/2);
  // The stream 10 11 12 | 20 21 22 23 24 [SEP] 30 cut into pieces of 3: no [SEP] where a document
  // ends with its sequence (the sequence's own [SEP] separates them), one where it ends inside.
  const std::vector<std::vector<int64_t>> expected = {{1, 10, 11, 12, 2}, {1, 20, 21, 22, 2}, {1, 23, 24, 2, 2}};
  CHECK(sequences == expected);  // "30" is too short to fill a sequence: dropped
  CHECK(datasets::pack_sequences({}, 8, 1, 2).empty());
  CHECK_THROWS_WITH_AS(datasets::pack_sequences(documents, 2, 1, 2), doctest::Contains("a length of 2"), Error);
}

TEST_CASE("mask_for_mlm: 15% chosen, of which 80% [MASK], 10% random, 10% kept; never [CLS] or [SEP]") {
  const int64_t kMask = 3, kCls = 1, kSep = 2;
  std::vector<int64_t> ids(200000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i % 100 == 0 ? kCls : (i % 100 == 99 ? kSep : 10 + static_cast<int64_t>(i % 50));
  const datasets::MaskingOptions options{.vocab_size = 1000, .first_random_id = 10, .mask_id = kMask,
                                         .never_chosen = {0, kCls, kSep}};
  const datasets::MaskedSequence masked = datasets::mask_for_mlm(ids, options, 42);
  int64_t text = 0, chosen = 0, as_mask = 0, as_random = 0, kept = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool structural = ids[i] == kCls || ids[i] == kSep;
    if (structural) {
      CHECK(masked.labels[i] == kIgnoreIndex);
      CHECK(masked.inputs[i] == ids[i]);
      continue;
    }
    ++text;
    if (masked.labels[i] == kIgnoreIndex) {
      CHECK(masked.inputs[i] == ids[i]);  // not chosen: untouched
      continue;
    }
    ++chosen;
    CHECK(masked.labels[i] == ids[i]);
    if (masked.inputs[i] == kMask) {
      ++as_mask;
    } else if (masked.inputs[i] == ids[i]) {
      ++kept;  // a random draw equal to the original (1 in 990) counts here too
    } else {
      CHECK(masked.inputs[i] >= 10);
      CHECK(masked.inputs[i] < 1000);
      ++as_random;
    }
  }
  // Binomial counts: 4 standard deviations at these sizes are under 0.5 percentage points.
  CHECK(static_cast<double>(chosen) / text == doctest::Approx(0.15).epsilon(0.04));
  CHECK(static_cast<double>(as_mask) / chosen == doctest::Approx(0.8).epsilon(0.02));
  CHECK(static_cast<double>(as_random) / chosen == doctest::Approx(0.1).epsilon(0.1));
  CHECK(static_cast<double>(kept) / chosen == doctest::Approx(0.1).epsilon(0.1));
}

TEST_CASE("mask_for_mlm: the seed alone decides which positions are chosen and how") {
  const std::vector<int64_t> ids = {1, 15, 16, 17, 18, 19, 20, 21, 22, 2};
  const datasets::MaskingOptions options{.vocab_size = 100, .first_random_id = 5, .mask_id = 3, .never_chosen = {1, 2},
                                         .choose = 0.5};
  CHECK(datasets::mask_for_mlm(ids, options, 7).inputs == datasets::mask_for_mlm(ids, options, 7).inputs);
  bool some_differ = false;
  for (uint64_t seed = 0; seed < 20 && !some_differ; ++seed) {
    some_differ = datasets::mask_for_mlm(ids, options, seed).labels != datasets::mask_for_mlm(ids, options, seed + 100).labels;
  }
  CHECK(some_differ);
  // Never-chosen ids change nothing of the draws: the same seed marks the same positions.
  datasets::MaskingOptions no_specials = options;
  no_specials.never_chosen = {};
  no_specials.choose = 1.0;
  const auto all = datasets::mask_for_mlm(ids, no_specials, 7);
  CHECK(std::count(all.labels.begin(), all.labels.end(), kIgnoreIndex) == 0);
}

TEST_CASE("mask_for_mlm: probabilities that are not, and an empty random range, are errors") {
  const std::vector<int64_t> ids = {5, 6};
  CHECK_THROWS_WITH_AS(datasets::mask_for_mlm(ids, {.vocab_size = 10, .choose = 1.5}, 0),
                       doctest::Contains("must be probabilities"), Error);
  CHECK_THROWS_WITH_AS(datasets::mask_for_mlm(ids, {.vocab_size = 10, .as_mask = 0.8, .as_random = 0.3}, 0),
                       doctest::Contains("as_mask + as_random <= 1"), Error);
  CHECK_THROWS_WITH_AS(datasets::mask_for_mlm(ids, {.vocab_size = 10, .first_random_id = 10}, 0),
                       doctest::Contains("[10, 10) is an empty range"), Error);
}

TEST_CASE("mask_for_mlm: whole words, a word's pieces are chosen together or not at all") {
  // Ids 20-29 are "##" pieces. Words of 1 to 4 pieces, sequences cut at every 50th position.
  const int64_t kCls = 1, kSep = 2, kMask = 3;
  std::vector<bool> continues_word(40, false);
  for (int64_t id = 20; id < 30; ++id) continues_word[static_cast<size_t>(id)] = true;
  std::vector<int64_t> ids;
  for (int64_t word = 0; ids.size() < 100000; ++word) {
    if (ids.size() % 50 == 0) ids.push_back(ids.empty() ? kCls : kSep);
    ids.push_back(10 + word % 10);
    for (int64_t piece = 0; piece < word % 4; ++piece) ids.push_back(20 + (word + piece) % 10);
  }
  datasets::MaskingOptions options{.vocab_size = 40, .first_random_id = 10, .mask_id = kMask,
                                   .never_chosen = {0, kCls, kSep}, .continues_word = continues_word};
  const datasets::MaskedSequence masked = datasets::mask_for_mlm(ids, options, 11);
  int64_t words = 0, chosen_words = 0, text = 0, chosen = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool structural = ids[i] == kCls || ids[i] == kSep;
    if (structural) {
      CHECK(masked.labels[i] == kIgnoreIndex);
      continue;
    }
    ++text;
    chosen += masked.labels[i] != kIgnoreIndex;
    const bool starts_word = !continues_word[static_cast<size_t>(ids[i])] || ids[i - 1] == kCls || ids[i - 1] == kSep;
    if (starts_word) {
      ++words;
      chosen_words += masked.labels[i] != kIgnoreIndex;
    } else {
      // A continuation piece shares its word's fate: chosen exactly when the piece before is.
      CHECK((masked.labels[i] != kIgnoreIndex) == (masked.labels[i - 1] != kIgnoreIndex));
    }
    if (masked.labels[i] != kIgnoreIndex) CHECK(masked.labels[i] == ids[i]);
  }
  CHECK(static_cast<double>(chosen_words) / words == doctest::Approx(0.15).epsilon(0.05));
  CHECK(static_cast<double>(chosen) / text == doctest::Approx(0.15).epsilon(0.08));
  // A "##" piece right after [SEP] (its word began in the sequence before) starts a word of its own.
  const std::vector<int64_t> cut = {kCls, 25, 26, kSep};
  options.choose = 1.0;
  const auto all = datasets::mask_for_mlm(cut, options, 3);
  CHECK(all.labels == std::vector<int64_t>{kIgnoreIndex, 25, 26, kIgnoreIndex});

  CHECK_THROWS_WITH_AS(datasets::mask_for_mlm(cut, {.vocab_size = 50, .continues_word = continues_word}, 0),
                       doctest::Contains("continues_word has 40 entries for a vocabulary of 50"), Error);
  CHECK_THROWS_WITH_AS(datasets::mask_for_mlm({kCls, 45}, options, 0),
                       doctest::Contains("id 45 at position 1 is outside the vocabulary of 40"), Error);
}

namespace {

// A small vocabulary in BERT's notation: ids 0-4 special, then words and continuation pieces.
text::WordPieceTokenizer polarity_vocabulary() {
  return text::WordPieceTokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "food", "was", "good",
                                   "bad", "dis", "##gust", "##ing", "great", "not", ",", "!"});
}

}  // namespace

TEST_CASE("read_polarity_lexicon: words by sign, zero scores and phrases left out, words as the tokenizer writes them") {
  ScratchDir scratch("polarity");
  scratch.write("lexicon.json",
                R"({"good": 3, "bad": -3, "disgusting": -4, "meh": 0, "cool stuff": 3, "Great": 3, "can't stand": -3})");
  const auto tokenizer = polarity_vocabulary();
  const datasets::PolarityLexicon lexicon = datasets::read_polarity_lexicon(scratch.file("lexicon.json"), tokenizer);
  CHECK(lexicon.entries_read == 7);
  CHECK(lexicon.phrases_skipped == 2);  // "cool stuff", and "can't stand" (can ' t stand)
  const std::unordered_map<std::string, int64_t> expected = {{"good", 1}, {"bad", 0}, {"disgusting", 0}, {"great", 1}};
  CHECK(lexicon.polarity == expected);  // "meh" (0) has no polarity; "Great" is looked up as "great"
}

TEST_CASE("word_polarity_targets: the first piece of each lexicon word, whole words only, no brackets") {
  ScratchDir scratch("polarity_targets");
  scratch.write("lexicon.json", R"({"good": 3, "bad": -2, "disgusting": -4, "dis": -1, "[UNK]": 2})");
  const auto tokenizer = polarity_vocabulary();
  const auto lexicon = datasets::read_polarity_lexicon(scratch.file("lexicon.json"), tokenizer);
  const auto ids = [&](const std::vector<std::string>& tokens) {
    std::vector<int64_t> out;
    for (const auto& token : tokens) out.push_back(tokenizer.token_to_id(token));
    return out;
  };
  // "##ing" at the start ends a word of the sequence before: skipped. "dis ##gust ##ing" is
  // "disgusting" (negative) at its first piece, not "dis"; "[UNK]" in the lexicon is a phrase
  // ("[", "unk", "]") and never matches the piece [UNK].
  const auto sequence = ids({"##ing", "[CLS]", "the", "food", "was", "dis", "##gust", "##ing", ",", "not", "good",
                             "[UNK]", "dis", "bad", "[SEP]"});
  const std::vector<int64_t> expected = {kIgnoreIndex, kIgnoreIndex, kIgnoreIndex, kIgnoreIndex, kIgnoreIndex, 0, kIgnoreIndex, kIgnoreIndex, kIgnoreIndex, kIgnoreIndex, 1, kIgnoreIndex, 0, 0, kIgnoreIndex};
  CHECK(datasets::word_polarity_targets(sequence, tokenizer, lexicon) == expected);
  // A word cut by the sequence's end is read as far as it goes: "dis ##gust" is not in the lexicon.
  CHECK(datasets::word_polarity_targets(ids({"dis", "##gust"}), tokenizer, lexicon) == std::vector<int64_t>{kIgnoreIndex, kIgnoreIndex});
  CHECK(datasets::word_polarity_targets({}, tokenizer, lexicon).empty());
}

TEST_CASE("read_polarity_lexicon: a missing file, bad JSON, a bad score and a contradiction are errors") {
  ScratchDir scratch("polarity_errors");
  const auto tokenizer = polarity_vocabulary();
  const auto read = [&](const std::string& content) {
    scratch.write("lexicon.json", content);
    return datasets::read_polarity_lexicon(scratch.file("lexicon.json"), tokenizer);
  };
  CHECK_THROWS_WITH_AS(datasets::load_afinn(scratch.file("absent"), tokenizer),
                       doctest::Contains("fetch_data.sh sentiment"), Error);
  CHECK_THROWS_WITH_AS(read(R"({"good": 3,)"), doctest::Contains("not valid JSON"), Error);
  CHECK_THROWS_WITH_AS(read(R"(["good", "bad"])"), doctest::Contains("expected a JSON object of word -> score, found a JSON array"),
                       Error);
  CHECK_THROWS_WITH_AS(read(R"({"good": 7})"), doctest::Contains("\"good\" must be an integer from -5 to 5, got 7"),
                       Error);
  CHECK_THROWS_WITH_AS(read(R"({"good": "yes"})"), doctest::Contains("got \"yes\""), Error);
  CHECK_THROWS_WITH_AS(read(R"({"good": 2.5})"), doctest::Contains("got 2.5"), Error);
  // Scores go through the library's one integer conversion: no float is cast, whole or not.
  CHECK_THROWS_WITH_AS(read(R"({"good": 3.0})"), doctest::Contains("got 3.0"), Error);
  CHECK_THROWS_WITH_AS(read(R"({"good": 1e300})"), doctest::Contains("got 1e+300"), Error);
  CHECK_THROWS_WITH_AS(read(R"({"good": 9223372036854775808})"), doctest::Contains("got 9223372036854775808"), Error);
  CHECK_THROWS_WITH_AS(read(R"({"bad": 18446744073709551615})"), doctest::Contains("got 18446744073709551615"),
                       Error);
  CHECK_THROWS_WITH_AS(read(R"({"good": [3]})"), doctest::Contains("got a JSON array"), Error);
  CHECK_THROWS_WITH_AS(read("{\"good\": " + std::string(100'000, '[') + std::string(100'000, ']') + "}"),
                       doctest::Contains("nested deeper than"), Error);
  CHECK_THROWS_WITH_AS(read(R"({"Good": 3, "good": -2})"), doctest::Contains("opposite polarities"), Error);
  CHECK_THROWS_WITH_AS(read(R"({"meh": 0, "cool stuff": 2})"), doctest::Contains("no word with a polarity"), Error);
}

TEST_CASE("MaskingOptions::for_tokenizer: [MASK], the structural ids and the random range from the tokenizer") {
  // Bracketed entries first, as in BERT's vocabulary: [PAD] [UNK] [CLS] [SEP] [MASK] and two
  // placeholders; the first real piece is id 7.
  const text::WordPieceTokenizer tokenizer({"[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused1]",
                                            "the", "dis", "##gust", "##ing", "good", "#", "##"});
  const datasets::MaskingOptions pieces = datasets::MaskingOptions::for_tokenizer(tokenizer);
  CHECK(pieces.vocab_size == 14);
  CHECK(pieces.mask_id == 5);
  CHECK(pieces.first_random_id == 7);
  CHECK(pieces.never_chosen == std::vector<int64_t>{3, 4, 0});  // [CLS], [SEP], [PAD]
  CHECK(pieces.continues_word.empty());
  CHECK(pieces.choose == 0.15);
  const datasets::MaskingOptions words = datasets::MaskingOptions::for_tokenizer(tokenizer, /*whole_words=*/true);
  // "##gust" and "##ing" carry on a word; "#" and "##" alone do not (neither does encode make them so).
  const std::vector<bool> expected = {false, false, false, false, false, false, false,
                                      false, false, true,  true,  false, false, false};
  CHECK(words.continues_word == expected);

  // Without [PAD] it is not among the never chosen; without [MASK] there is nothing to mask with.
  const text::WordPieceTokenizer no_pad({"[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"});
  CHECK(datasets::MaskingOptions::for_tokenizer(no_pad).never_chosen == std::vector<int64_t>{1, 2});
  CHECK(datasets::MaskingOptions::for_tokenizer(no_pad).first_random_id == 4);
  CHECK_THROWS_WITH_AS(datasets::MaskingOptions::for_tokenizer(text::WordPieceTokenizer({"[UNK]", "a"})),
                       doctest::Contains("has no [MASK]"), Error);
  CHECK_THROWS_WITH_AS(datasets::MaskingOptions::for_tokenizer(text::WordPieceTokenizer({"[UNK]", "[MASK]"})),
                       doctest::Contains("no piece after its bracketed entries"), Error);
}

TEST_CASE("MaskedBatch stacks masked rows and finds the chosen positions once, on the host") {
  datasets::MaskedBatch batch;
  batch.append({{1, 9, 3, 2}, {kIgnoreIndex, 9, kIgnoreIndex, kIgnoreIndex}});
  batch.append({{1, 3, 3, 2}, {kIgnoreIndex, 7, 8, kIgnoreIndex}});
  CHECK(batch.rows == 2);
  CHECK(batch.length == 4);
  CHECK(batch.inputs == std::vector<int64_t>{1, 9, 3, 2, 1, 3, 3, 2});
  CHECK(batch.labels == std::vector<int64_t>{kIgnoreIndex, 9, kIgnoreIndex, kIgnoreIndex, kIgnoreIndex, 7, 8,
                                             kIgnoreIndex});
  CHECK(batch.positions == std::vector<int64_t>{1, 5, 6});
  CHECK_THROWS_WITH_AS(batch.append({{1, 2}, {kIgnoreIndex, kIgnoreIndex}}),
                       doctest::Contains("a sequence of 2 ids in a batch of rows of 4"), Error);
  CHECK_THROWS_WITH_AS(batch.append({{1, 2, 3, 4}, {kIgnoreIndex}}), doctest::Contains("4 inputs but 1 labels"), Error);
  // With a tokenizer's masking, the positions are those mask_for_mlm chose.
  const text::WordPieceTokenizer tokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d"});
  const datasets::MaskingOptions options = datasets::MaskingOptions::for_tokenizer(tokenizer);
  datasets::MaskedBatch masked;
  std::vector<int64_t> expected;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const datasets::MaskedSequence sequence = datasets::mask_for_mlm({2, 5, 6, 7, 8, 5, 6, 7, 8, 3}, options, seed);
    for (int64_t t = 0; t < 10; ++t) {
      if (sequence.labels[static_cast<size_t>(t)] != kIgnoreIndex) expected.push_back(masked.rows * 10 + t);
    }
    masked.append(sequence);
  }
  CHECK(masked.positions == expected);
}
