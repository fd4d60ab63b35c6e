// Prints nn/text/gpt2_character_classes.cpp: the code point ranges of \p{L}, \p{N} and \s as
// the JavaScript regular expression engine of the running node sees them, so that ember's
// GPT-2 pre-tokeniser classifies characters exactly as the reference encoder does.
//
//   node tests/golden/make_gpt2_character_classes.js > nn/text/gpt2_character_classes.cpp
'use strict';

function rangesOf(pattern) {
  const ranges = [];
  let start = -1;
  for (let cp = 0; cp <= 0x110000; cp++) {
    const inside = cp < 0x110000 && !(cp >= 0xd800 && cp <= 0xdfff) && pattern.test(String.fromCodePoint(cp));
    if (inside && start < 0) start = cp;
    if (!inside && start >= 0) {
      ranges.push([start, cp - 1]);
      start = -1;
    }
  }
  return ranges;
}

function table(name, ranges) {
  const hex = (cp) => '0x' + cp.toString(16).toUpperCase().padStart(4, '0');
  const rows = [];
  for (let i = 0; i < ranges.length; i += 6) {
    rows.push('    ' + ranges.slice(i, i + 6).map(([a, b]) => `{${hex(a)}, ${hex(b)}}`).join(', ') + ',');
  }
  return `constexpr CodePointRange ${name}[] = {\n${rows.join('\n')}\n};\n`;
}

const letters = rangesOf(/^\p{L}$/u);
const numbers = rangesOf(/^\p{N}$/u);
const spaces = rangesOf(/^\s$/u);

process.stdout.write(`// The character classes of GPT-2's pre-tokenising pattern: \\p{L} (letters), \\p{N} (numbers) and
// \\s (JavaScript's whitespace), as code point ranges of Unicode ${process.versions.unicode}.
// Written by tests/golden/make_gpt2_character_classes.js; regenerate rather than edit.
#include "nn/text/gpt2_character_classes.h"

#include <algorithm>
#include <iterator>

namespace ember::text {

namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

${table('kLetterRanges', letters)}
${table('kNumberRanges', numbers)}
${table('kWhitespaceRanges', spaces)}
template <size_t N>
bool in_ranges(const CodePointRange (&ranges)[N], char32_t c) {
  // The first range that ends at or after c; c is inside it when it also starts at or before c.
  const CodePointRange* found =
      std::lower_bound(std::begin(ranges), std::end(ranges), c, [](const CodePointRange& range, char32_t value) {
        return range.last < value;
      });
  return found != std::end(ranges) && found->first <= c;
}

}  // namespace

Gpt2CharacterClass gpt2_character_class(char32_t c) {
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return Gpt2CharacterClass::kLetter;
    if (c >= '0' && c <= '9') return Gpt2CharacterClass::kNumber;
    if (c == ' ' || (c >= '\\t' && c <= '\\r')) return Gpt2CharacterClass::kWhitespace;
    return Gpt2CharacterClass::kOther;
  }
  if (in_ranges(kLetterRanges, c)) return Gpt2CharacterClass::kLetter;
  if (in_ranges(kNumberRanges, c)) return Gpt2CharacterClass::kNumber;
  if (in_ranges(kWhitespaceRanges, c)) return Gpt2CharacterClass::kWhitespace;
  return Gpt2CharacterClass::kOther;
}

}  // namespace ember::text
`);
console.error(`letters ${letters.length} ranges, numbers ${numbers.length}, whitespace ${spaces.length}: ${JSON.stringify(spaces)}`);
