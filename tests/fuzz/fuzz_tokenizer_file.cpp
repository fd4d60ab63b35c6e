// Fuzzes text::load_tokenizer: any tokenizer file (word, char, WordPiece or BPE, chosen by its
// "type"), then encodes and decodes a few strings with what it loaded, since a file that loads
// into an inconsistent tokenizer is as much a bug as one that crashes the loader.
#include "fuzz_input.h"
#include "tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "tokenizer.json");
  fuzzing::expect_success_or_error([&] { fuzzing::use_tokenizer(*text::load_tokenizer(path)); });
  return 0;
}
