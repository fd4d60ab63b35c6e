// Fuzzes datasets::read_moby_dick, the plain-text reader and its train/validation cut (UTF-8
// checks, code point counts).
#include "fuzz_input.h"
#include "nn/data/datasets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "moby-dick.txt");
  fuzzing::expect_success_or_error([&] { (void)datasets::read_moby_dick(path); });
  return 0;
}
