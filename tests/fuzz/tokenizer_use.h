// What the tokenizer fuzz targets do with a tokenizer that loaded: encode a few texts (ASCII,
// accents, CJK, emoji, malformed UTF-8), decode the ids back, and decode every id once.
#pragma once

#include <string>
#include <vector>

#include "ember.h"
#include "nn/text/text.h"

namespace ember::fuzzing {

inline void use_tokenizer(const text::Tokenizer& tokenizer) {
  static const std::vector<std::string> texts = {
      "", "Hello, world! unaffable", "Die Insel ist voll von Sommergästen.", "naïve café 東京 😀",
      std::string("bad \xff\xfe utf-8 \xc3"), "   \t\n  ", "[CLS] [SEP] [MASK] ##ing"};
  for (const std::string& text : texts) {
    const std::vector<int64_t> ids = tokenizer.encode(text);
    (void)tokenizer.decode(ids);
    try {
      (void)tokenizer.encode_with_specials(text, 8);
    } catch (const Error&) {
      // A tokenizer without start and end tokens refuses; that is documented, not a finding.
    }
  }
  // Every id, so that each vocabulary entry the file made is read back once. Capped: a huge
  // vocabulary would only slow the fuzzer down.
  std::vector<int64_t> all_ids;
  for (int64_t id = 0; id < std::min<int64_t>(tokenizer.vocab_size(), 4096); ++id) all_ids.push_back(id);
  (void)tokenizer.decode(all_ids);
}

}  // namespace ember::fuzzing
