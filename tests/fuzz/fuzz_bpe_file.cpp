// Fuzzes text::BpeTokenizer::load (the merges as id pairs, the special tokens), then uses the
// tokenizer it loaded: merges that refer to ids not yet defined must be refused at load, not
// met while encoding.
#include "fuzz_input.h"
#include "tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "bpe.json");
  fuzzing::expect_success_or_error([&] { fuzzing::use_tokenizer(text::BpeTokenizer::load(path)); });
  return 0;
}
