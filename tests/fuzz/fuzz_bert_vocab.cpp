// Fuzzes the two readers of BERT's vocabulary: WordPieceTokenizer::from_vocab_txt (one token a
// line) and from_bert_vocab_json (a JSON array of tokens). The first byte picks the reader, the
// rest is the file.
#include "fuzz_input.h"
#include "tokenizer_use.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  if (size == 0) return 0;
  const bool as_json = data[0] % 2 == 1;
  const std::string path =
      fuzzing::write_input(fuzzing::as_text(data + 1, size - 1), as_json ? "vocab.json" : "vocab.txt");
  fuzzing::expect_success_or_error([&] {
    fuzzing::use_tokenizer(as_json ? text::WordPieceTokenizer::from_bert_vocab_json(path)
                                   : text::WordPieceTokenizer::from_vocab_txt(path));
  });
  return 0;
}
