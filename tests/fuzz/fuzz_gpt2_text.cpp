// Fuzzes text::Gpt2Tokenizer's encoding of arbitrary bytes, malformed UTF-8 included: the pieces
// of GPT-2's pattern must concatenate to the input, and decode(encode(s)) must give s back. The
// input is text, not a file; the vocabulary is a small one in GPT-2's file format, written once.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "nn/text/gpt2_tokenizer.h"
#include "nn/text/unicode.h"

namespace {

// Merges over a few English words, an accented letter and runs of newlines and spaces.
const char* const kMerges[] = {"Ġ t",  "h e",    "Ġt he", "a t",   "Ġ c",  "Ġc at",  "i n",
                               "Ġ in", "Ċ Ċ",    "Ġ Ġ",   "ĠĠ ĠĠ", "' s",  "Ã ©",    "a f",
                               "c af", "caf Ã©", "e r",   "Ġ w",   "Ġw h", "Ġwh er", "Ġwher e"};

std::string notation(unsigned char byte) {
  return ember::text::encode_utf8(ember::text::Gpt2Tokenizer::byte_to_symbol_character(byte));
}

const ember::text::Gpt2Tokenizer& tokenizer() {
  static const ember::text::Gpt2Tokenizer gpt2 = [] {
    nlohmann::json encoder = nlohmann::json::object();
    int64_t id = 0;
    for (int byte = 0; byte < 256; ++byte) encoder[notation(static_cast<unsigned char>(byte))] = id++;
    std::string merges = "#version: 0.2\n";
    for (const std::string_view merge : kMerges) {
      const size_t space = merge.find(' ');
      encoder[std::string(merge.substr(0, space)) + std::string(merge.substr(space + 1))] = id++;
      merges += std::string(merge) + "\n";
    }
    encoder["<|endoftext|>"] = id;
    const std::string encoder_path = ember::fuzzing::input_path("gpt2_encoder.json");
    const std::string merges_path = ember::fuzzing::input_path("gpt2_vocab.bpe");
    std::ofstream(encoder_path, std::ios::binary) << encoder.dump();
    std::ofstream(merges_path, std::ios::binary) << merges;
    ember::text::Gpt2Tokenizer loaded = ember::text::Gpt2Tokenizer::load(encoder_path, merges_path);
    std::remove(encoder_path.c_str());  // read whole by load: nothing is left behind
    std::remove(merges_path.c_str());
    return loaded;
  }();
  return gpt2;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  const std::string_view text = fuzzing::as_text(data, size);
  std::string joined;
  for (const std::string& piece : text::Gpt2Tokenizer::pre_tokenize(text)) {
    if (piece.empty()) __builtin_trap();  // an empty piece would never advance
    joined += piece;
  }
  if (joined != text) __builtin_trap();
  if (tokenizer().decode(tokenizer().encode(text)) != text) __builtin_trap();
  return 0;
}
