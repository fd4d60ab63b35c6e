// Fuzzes datasets::read_de_en, the German-English reader (the Ding format: sides, | sub-entries,
// ; variants, nested brackets, UTF-8).
#include "fuzz_input.h"
#include "nn/data/datasets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "de-en.txt");
  fuzzing::expect_success_or_error([&] { (void)datasets::read_de_en(path); });
  return 0;
}
