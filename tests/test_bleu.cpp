// Corpus BLEU-4 against values worked out by hand, and the scoring tokeniser.
#include <cmath>

#include "helpers.h"
#include "nn/train/bleu.h"

using namespace ember;
using namespace ember::testing;

namespace {

using Sentences = std::vector<std::vector<std::string>>;

std::vector<std::string> words(const std::string& sentence) { return train::bleu_tokens(sentence); }

}  // namespace

TEST_CASE("a perfect translation scores 100") {
  const train::BleuScore bleu =
      train::corpus_bleu({words("the cat sat on the mat"), words("a b c d")}, {words("the cat sat on the mat"), words("a b c d")});
  CHECK(bleu.score == doctest::Approx(100));
  CHECK(bleu.brevity_penalty == 1.0);
  for (double precision : bleu.precisions) CHECK(precision == doctest::Approx(100));
  CHECK(bleu.hypothesis_length == 10);
  CHECK(bleu.reference_length == 10);
}

TEST_CASE("one substituted word: precisions 7/8, 5/7, 3/6, 1/5 and BLEU 50") {
  // Reference a b c d e f g h, hypothesis a b c d x f g h. The n-grams that contain x miss:
  //   1-grams 7 of 8, 2-grams 5 of 7 (d x, x f miss), 3-grams 3 of 6, 4-grams 1 of 5 (a b c d).
  // Geometric mean: (7/8 * 5/7 * 3/6 * 1/5)^(1/4) = (1/16)^(1/4) = 1/2; same length, BP 1.
  const train::BleuScore bleu = train::corpus_bleu({words("a b c d x f g h")}, {words("a b c d e f g h")});
  CHECK(bleu.matches == std::array<int64_t, 4>{7, 5, 3, 1});
  CHECK(bleu.totals == std::array<int64_t, 4>{8, 7, 6, 5});
  CHECK(bleu.precisions[0] == doctest::Approx(87.5));
  CHECK(bleu.precisions[3] == doctest::Approx(20));
  CHECK(bleu.brevity_penalty == 1.0);
  CHECK(bleu.score == doctest::Approx(50));
  CHECK(bleu.summary() == "BLEU 50.00  (87.5/71.4/50.0/20.0, BP 1.000, hyp 8 / ref 8 tokens)");
}

TEST_CASE("a short hypothesis is penalised by exp(1 - r/c)") {
  // Every n-gram of "a b c d" is in the reference, but it is half as long: BP = exp(1 - 8/4).
  const train::BleuScore bleu = train::corpus_bleu({words("a b c d")}, {words("a b c d e f g h")});
  CHECK(bleu.brevity_penalty == doctest::Approx(std::exp(-1.0)));
  CHECK(bleu.score == doctest::Approx(100 * std::exp(-1.0)));
  // A longer hypothesis is not penalised by BP (its precisions suffer instead).
  CHECK(train::corpus_bleu({words("a b c d e f g h i")}, {words("a b c d e f g h")}).brevity_penalty == 1.0);
}

TEST_CASE("repeated words match at most as often as the reference has them") {
  const train::BleuScore bleu = train::corpus_bleu({words("the the the the")}, {words("the cat")});
  CHECK(bleu.matches[0] == 1);
  CHECK(bleu.totals[0] == 4);
  CHECK(bleu.score == 0);  // no matching 2-gram: without smoothing the score is 0
}

TEST_CASE("counts are summed over the corpus before the mean, not averaged per sentence") {
  // The two examples above together: 1-grams (4+7)/(4+8), 2-grams (3+5)/(3+7),
  // 3-grams (2+3)/(2+6), 4-grams (1+1)/(1+5); lengths 12 and 12.
  const train::BleuScore bleu =
      train::corpus_bleu({words("a b c d"), words("a b c d x f g h")}, {words("a b c d"), words("a b c d e f g h")});
  const double expected = 100 * std::pow(11.0 / 12 * 8.0 / 10 * 5.0 / 8 * 2.0 / 6, 0.25);
  CHECK(bleu.score == doctest::Approx(expected));
  CHECK(bleu.score == doctest::Approx(62.52).epsilon(1e-3));
}

TEST_CASE("an empty corpus or empty hypotheses score 0; mismatched counts are refused") {
  CHECK(train::corpus_bleu({}, {}).score == 0);
  const train::BleuScore empty = train::corpus_bleu({{}}, {words("a b c d")});
  CHECK(empty.score == 0);
  CHECK(empty.brevity_penalty == 0);
  CHECK_THROWS_WITH_ALL(train::corpus_bleu({words("a")}, Sentences{}), "corpus_bleu", "1 hypotheses but 0 references");
}

TEST_CASE("bleu_tokens splits punctuation from words but keeps numbers and non-ASCII letters whole") {
  CHECK(words("Hello, world!") == std::vector<std::string>{"Hello", ",", "world", "!"});
  CHECK(words("It costs 3.50 dollars (1,000 cents).") ==
        std::vector<std::string>{"It", "costs", "3.50", "dollars", "(", "1,000", "cents", ")", "."});
  CHECK(words("Grüße,\tWelt") == std::vector<std::string>{"Grüße", ",", "Welt"});
  CHECK(words("don't") == std::vector<std::string>{"don", "'", "t"});
  CHECK(words("  ").empty());
  CHECK(words("").empty());
}
