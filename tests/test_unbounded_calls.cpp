// Calls that must return: loaders given a FIFO (or anything not a regular file) refuse it
// before reading, bucketed_batches with a huge chunk size and WordPiece with a huge
// max_chars_per_word finish in time bounded by their input, and sizes no vector can hold end
// in an ember::Error naming the call, not a standard library exception.
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <limits>

#include "helpers.h"
#include "nn/data/batching.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::testing;

namespace {

std::string make_fifo(const ScratchDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return path;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("loaders refuse a FIFO instead of waiting for a writer") {
  ScratchDir dir("unbounded_calls");
  const std::string fifo = make_fifo(dir, "pipe");
  CHECK_THROWS_WITH_ALL(nn::load_safetensors(fifo), "load_safetensors", "pipe", "not a regular file");
  CHECK_THROWS_WITH_ALL(text::load_tokenizer(fifo), "pipe", "not a regular file");
  CHECK_THROWS_WITH_ALL(text::WordPieceTokenizer::from_vocab_txt(fifo), "from_vocab_txt", "not a regular file");
  CHECK_THROWS_WITH_ALL(text::WordPieceTokenizer::from_bert_vocab_json(fifo), "from_bert_vocab_json",
                        "not a regular file");
  CHECK_THROWS_WITH_ALL(train::read_metrics_csv(fifo), "pipe", "not a regular file");
  CHECK_THROWS_WITH_ALL(nn::load_safetensors(dir.path()), "load_safetensors", "not a regular file");
}

TEST_CASE("bucketed_batches with a chunk size past the data set returns") {
  const std::vector<int64_t> lengths = {5, 1, 4, 2, 3, 7, 6};
  for (const int64_t chunk_batches : {int64_t{1} << 40, std::numeric_limits<int64_t>::max()}) {
    const auto batches = datasets::bucketed_batches(lengths, {.batch_size = 1 << 30, .chunk_batches = chunk_batches}, 3);
    REQUIRE(batches.size() == 1);
    CHECK(batches[0].size() == lengths.size());
    const auto by_tokens = datasets::bucketed_batches(
        lengths, {.max_tokens = std::numeric_limits<int64_t>::max(), .chunk_batches = chunk_batches}, 3);
    CHECK(by_tokens.size() == 1);
  }
  // Lengths whose sum or padded size is past int64 still batch.
  const std::vector<int64_t> huge = {std::numeric_limits<int64_t>::max() / 2, std::numeric_limits<int64_t>::max() / 2,
                                     std::numeric_limits<int64_t>::max() / 2};
  CHECK(datasets::bucketed_batches(huge, {.max_tokens = 1 << 20}, 1).size() == 3);
}

TEST_CASE("WordPiece's piece search is bounded by the vocabulary's longest piece") {
  text::WordPieceTokenizer tokenizer({"[UNK]", "a", "##a", "b", "##b"}, {.max_chars_per_word = 1'000'000});
  const std::string word(20'000, 'a');
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> ids = tokenizer.encode(word + " b" + word);
  CHECK(seconds_since(start) < 10.0);
  REQUIRE(ids.size() == 40'001);
  CHECK(ids.front() == 1);
  CHECK(ids[1] == 2);
  CHECK(ids[20'000] == 3);
  CHECK(ids[20'001] == 2);
}

TEST_CASE("sizes no vector can hold become an ember::Error naming the call") {
  CHECK_THROWS_WITH_ALL(datasets::shuffled_indices(int64_t{1} << 62, 0), "shuffled_indices", "4611686018427387904");
  CHECK_THROWS_WITH_ALL(datasets::shuffled_batches(int64_t{1} << 62, 8, 0), "shuffled_batches");
}
