// The four kinds of character GPT-2's pre-tokenising pattern tells apart: letters (\p{L}),
// numbers (\p{N}), whitespace (\s as JavaScript defines it) and everything else.
#pragma once

namespace ember::text {

enum class Gpt2CharacterClass { kLetter, kNumber, kWhitespace, kOther };

// JavaScript's \s is not Unicode's White_Space: it has U+FEFF (the byte-order mark) and lacks
// U+0085 (next line), so the reference encoder's whitespace is followed here rather than
// is_whitespace's. Surrogates and values past U+10FFFF are kOther.
Gpt2CharacterClass gpt2_character_class(char32_t c);

}  // namespace ember::text
