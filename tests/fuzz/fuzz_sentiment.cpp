// Fuzzes datasets::read_sentiment, the reader of the sentiment sentences: a JSON array of
// {"text": ..., "class": 0|1} records, malformed ones skipped and counted.
#include "fuzz_input.h"
#include "nn/data/datasets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "sentiment.json");
  fuzzing::expect_success_or_error([&] { (void)datasets::read_sentiment({path}); });
  return 0;
}
