// Word polarity for sentiment-aware pretraining. Masked language modelling learns that "good"
// and "bad" fill the same blanks ("the food was [MASK]"), so it puts them side by side, and
// fine-tuning must pull them apart from a few thousand labelled sentences. A lexicon of opinion
// words says which is which: AFINN-165 (Nielsen, 2011), 3,382 English words scored by hand from
// -5 (very negative) to +5, which the npm package `sentiment` ships. A second pretraining head
// predicts, at each word the lexicon knows, whether it is positive or negative (after SKEP,
// Tian et al., 2020), so the encoder carries polarity before it sees a single labelled sentence.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/text/wordpiece.h"

namespace ember::datasets {

struct PolarityLexicon {
  // Word as the tokenizer's basic_tokenize writes it (lower case, no accents) -> 1 for a
  // positive score, 0 for a negative one. Words scored 0 carry no polarity and are left out.
  std::unordered_map<std::string, int64_t> polarity;
  int64_t entries_read = 0;
  // Entries that are not one word to the tokenizer ("cool stuff", "can't stand"): a polarity
  // is given to one word's state, and a phrase has several.
  int64_t phrases_skipped = 0;
};

// Reads a JSON object of word -> integer score (AFINN's layout), each word normalised by
// tokenizer.basic_tokenize. Throws ember::Error naming the file for text that is not a JSON
// object, a score that is not an integer in [-5, 5] (naming the word), or two entries that
// normalise to one word with opposite polarity.
PolarityLexicon read_polarity_lexicon(const std::string& path, const text::WordPieceTokenizer& tokenizer);

// data_dir/sentiment/afinn-165.json, fetched with the sentiment sentences
// (scripts/fetch_data.sh sentiment).
PolarityLexicon load_afinn(const std::string& data_dir, const text::WordPieceTokenizer& tokenizer);

// The polarity targets of a sequence of word-piece ids: at the first piece of each word the
// lexicon knows, its polarity (0 or 1); kIgnoreIndex everywhere else. A word is a piece that
// does not continue a word and the continuation pieces right after it
// (WordPieceTokenizer::is_continuation; [CLS], [SEP] and [UNK] never match: the lexicon's words
// hold no brackets); continuation pieces at the start of the sequence finish a word the sequence
// before began, so they are skipped.
std::vector<int64_t> word_polarity_targets(const std::vector<int64_t>& ids, const text::WordPieceTokenizer& tokenizer,
                                           const PolarityLexicon& lexicon);

}  // namespace ember::datasets
