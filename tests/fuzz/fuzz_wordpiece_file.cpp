// Fuzzes text::WordPieceTokenizer::load (the file save() writes: vocabulary, special tokens and
// options), then uses the tokenizer it loaded.
#include "fuzz_input.h"
#include "tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "wordpiece.json");
  fuzzing::expect_success_or_error([&] { fuzzing::use_tokenizer(text::WordPieceTokenizer::load(path)); });
  return 0;
}
