// Sizes, counts and lengths that no host container can hold end in an ember::Error naming the
// call, at every public entry point that takes them: never std::length_error, std::bad_alloc or
// another standard library exception escaping to the user.
#include <cmath>
#include <cstdint>
#include <limits>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

// The promise for a size a call may accept: it returns, or it throws ember::Error; nothing else
// escapes (not length_error, not bad_alloc, not a crash).
#define CHECK_RETURNS_OR_REFUSES(expression)                                                   \
  do {                                                                                          \
    try {                                                                                       \
      (void)(expression);                                                                       \
    } catch (const ember::Error&) {                                                             \
    } catch (const std::exception& foreign) {                                                   \
      FAIL_CHECK(#expression " threw a foreign exception: " << foreign.what());                 \
    }                                                                                           \
  } while (false)

constexpr int64_t kHuge = int64_t{1} << 62;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

}  // namespace

TEST_CASE("factories and shapes") {
  CHECK_THROWS_AS(empty({kHuge}), Error);
  CHECK_THROWS_AS(zeros({int64_t{1} << 40, int64_t{1} << 10}), Error);
  CHECK_THROWS_AS(full({kHuge}, 1.0), Error);
  CHECK_THROWS_AS(arange(1e18), Error);
  CHECK_THROWS_AS(randn({kHuge}), Error);
  CHECK_THROWS_AS(randint(0, 10, {kHuge}), Error);
  CHECK_THROWS_AS(ones({4}).expand({kHuge, 4}).contiguous(), Error);
  CHECK_THROWS_AS(ones({1}).expand({kHuge}).sum(), Error);
}

TEST_CASE("ops") {
  const Tensor x = ones({2, 3});
  CHECK_THROWS_AS(topk(x, kHuge), Error);
  CHECK_THROWS_AS(chunk(x, kMax), Error);
  CHECK_RETURNS_OR_REFUSES(split(x, kHuge));
  CHECK_RETURNS_OR_REFUSES(chunk(x, kHuge));
  CHECK_THROWS_AS(split(x, std::vector<int64_t>{kMax, 2}), Error);
  CHECK_NOTHROW(tril(x, kMax));
  CHECK_THROWS_AS(einsum("ij->ji", {ones({1}).expand({kHuge})}), Error);
  CHECK_THROWS_AS(embedding(ones({kHuge / 1024, 1}).expand({kHuge, 1}), tensor<int64_t>({0}, {1})), Error);
}

TEST_CASE("modules whose parameters or tables could not be held are refused at construction") {
  CHECK_THROWS_AS(nn::Linear(kHuge, kHuge), Error);
  CHECK_THROWS_AS(nn::Linear(int64_t{1} << 40, int64_t{1} << 10), Error);
  CHECK_THROWS_AS(nn::Embedding(kHuge, 4), Error);
  CHECK_THROWS_AS(nn::LayerNorm{kHuge}, Error);
  CHECK_THROWS_AS(nn::MultiHeadAttention(kHuge, 1), Error);
  CHECK_THROWS_AS(nn::FeedForward(4, kHuge), Error);
  CHECK_THROWS_AS(nn::LearnedPositionalEmbedding(kHuge, 4), Error);
  nn::BertConfig config;
  config.vocab_size = kHuge;
  CHECK_THROWS_AS(nn::BertModel{config}, Error);
}

// The table's element count, 4 * 2^62, wrapped to 0 in a host vector's size: the constructor
// then wrote past an empty buffer (a crash) instead of refusing.
TEST_CASE("SinusoidalPositionalEncoding refuses a table whose element count overflows") {
  CHECK_THROWS_WITH_ALL(nn::SinusoidalPositionalEncoding(4, kHuge), "SinusoidalPositionalEncoding", "4611686018427387904", "overflow");
  CHECK_THROWS_AS(nn::SinusoidalPositionalEncoding(int64_t{1} << 40, int64_t{1} << 20), Error);
  const nn::SinusoidalPositionalEncoding small(6, 3);
  CHECK(small.pe.sizes() == Shape{3, 6});
  CHECK(small.pe.select(0, 2).select(0, 1).item<double>() == doctest::Approx(std::cos(2.0)));
}

TEST_CASE("data") {
  CHECK_THROWS_WITH_ALL(datasets::shuffled_indices(kHuge, 0), "shuffled_indices", "4611686018427387904");
  CHECK_RETURNS_OR_REFUSES(datasets::pad_batch({{1, 2}}, 0, kHuge));
  CHECK_RETURNS_OR_REFUSES(datasets::pack_sequences({{1, 2, 3}}, kHuge, 1, 2));
  CHECK_THROWS_AS(datasets::BatchSchedule::shuffled(kHuge, 8, 0).batch(0), Error);
  CHECK_RETURNS_OR_REFUSES(datasets::BatchSchedule::bucketed({3, 4, 5}, {.batch_size = kHuge}, 0).batch(0));
  CHECK_RETURNS_OR_REFUSES(datasets::bucketed_batches({3, 4, 5}, {.batch_size = kHuge, .chunk_batches = kHuge}, 0));
  CHECK_RETURNS_OR_REFUSES(datasets::DistributedSampler(datasets::BatchSchedule::shuffled(8, 4, 0), 0, 1 << 30).batch(0));
  CHECK_RETURNS_OR_REFUSES(datasets::shard_batch({1, 2, 3}, 0, std::numeric_limits<int>::max()));
}

TEST_CASE("text") {
  CHECK_THROWS_AS(text::BpeTokenizer::train({"a b c"}, kHuge), Error);
  CHECK_RETURNS_OR_REFUSES(text::WordTokenizer::train({"a b c"}, {.max_vocab_size = kHuge}));
  CHECK_RETURNS_OR_REFUSES(text::CharTokenizer::train({"a b c"}, {.min_frequency = kHuge}));
}

TEST_CASE("training helpers") {
  CHECK_THROWS_AS(nn::WarmupCosine(1e-3, kHuge, kHuge - 1), Error);
}

TEST_CASE("reading a huge view out") {
  const Tensor huge = ones({1}).expand({kHuge});
  CHECK_THROWS_AS(huge.to_vector<float>(), Error);
  CHECK_THROWS_AS(huge.clone(), Error);
  CHECK_THROWS_AS(to_string(huge), Error);
  CHECK_THROWS_AS(tensor(std::vector<float>{1.0f}, {kHuge}), Error);
  CHECK_THROWS_AS(softmax(ones({1, 1}).expand({kHuge, 1}), 1), Error);
  CHECK_THROWS_AS(cross_entropy(ones({1, 1}).expand({2, kHuge}), tensor<int64_t>({0, 0}, {2})), Error);
  CHECK_THROWS_AS(sum(ones({1, 1}).expand({kHuge, 2}), {1}), Error);
  CHECK_THROWS_AS(argmax(ones({1}).expand({kHuge}), 0), Error);
  CHECK_THROWS_AS(topk(ones({1}).expand({kHuge}), 2), Error);
  CHECK_THROWS_AS(sort(ones({1}).expand({kHuge})), Error);
}
