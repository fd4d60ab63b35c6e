// Fuzzes datasets::read_cmudict, the CMU Pronouncing Dictionary reader (entries, variants,
// comments, phonemes).
#include "fuzz_input.h"
#include "nn/data/datasets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "dict.txt");
  fuzzing::expect_success_or_error([&] { (void)datasets::read_cmudict(path); });
  return 0;
}
