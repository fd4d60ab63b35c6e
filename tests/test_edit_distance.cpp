// Levenshtein distance over token sequences and the corpus error rate built on it.
#include "helpers.h"
#include "nn/train/edit_distance.h"

using namespace ember;

namespace {

using Tokens = std::vector<std::string>;

std::vector<char> characters(const std::string& text) { return {text.begin(), text.end()}; }

}  // namespace

TEST_CASE("edit distance counts the fewest insertions, deletions and substitutions") {
  CHECK(train::edit_distance(characters("kitten"), characters("sitting")) == 3);  // k->s, e->i, +g
  CHECK(train::edit_distance(characters("flaw"), characters("lawn")) == 2);       // -f, +n
  CHECK(train::edit_distance(characters("same"), characters("same")) == 0);
  CHECK(train::edit_distance(characters(""), characters("abc")) == 3);
  CHECK(train::edit_distance(characters("abc"), characters("")) == 3);
  CHECK(train::edit_distance(characters(""), characters("")) == 0);
}

TEST_CASE("edit distance works on phonemes and ids") {
  // CAT: K AE1 T; CATS: K AE1 T S; a stress error is a substitution.
  CHECK(train::edit_distance(Tokens{"K", "AE1", "T"}, Tokens{"K", "AE1", "T", "S"}) == 1);
  CHECK(train::edit_distance(Tokens{"K", "AE0", "T"}, Tokens{"K", "AE1", "T"}) == 1);
  CHECK(train::edit_distance(std::vector<int64_t>{5, 6, 7}, std::vector<int64_t>{7, 6, 5}) == 2);
}

TEST_CASE("the error rate is total edits over total reference tokens") {
  train::ErrorRate per;
  CHECK(per.rate() == 0);
  per.add(Tokens{"K", "AE1", "T"}, Tokens{"K", "AE1", "T", "S"});     // 1 edit, 4 tokens
  per.add(Tokens{"D", "AO1", "G"}, Tokens{"D", "AO1", "G"});           // 0 edits, 3 tokens
  per.add(Tokens{}, Tokens{"AY1"});                                    // 1 edit, 1 token
  per.add(Tokens{"HH", "AH0", "L", "OW1"}, Tokens{"HH", "EH0", "L"});  // 2 edits, 3 tokens
  CHECK(per.edits == 4);
  CHECK(per.reference_tokens == 11);
  CHECK(per.rate() == doctest::Approx(4.0 / 11));
}
