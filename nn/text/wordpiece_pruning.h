// A smaller WordPiece vocabulary for a corpus: the pieces of a large one (BERT's 30,522) that the
// corpus uses most, with every character its words are made of, so that any word the large
// vocabulary covers is still covered (cut into more, shorter pieces where a long one was left
// out).
//
//   const auto bert = text::WordPieceTokenizer::from_bert_vocab_json("data/bert/vocab.json");
//   const auto small = text::prune_wordpiece_vocabulary(bert, documents, 8000);
//   small.save_vocab_txt("out/pretrain_bert/vocab.txt");
//
// Why: a small BERT pretrained on a few million words sees most of BERT's pieces rarely or
// never. Their embedding rows learn little, and the output layer over all 30,522 pieces is about
// half of each step. Kept pieces keep their tokens and their order; their ids are renumbered.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/text/wordpiece.h"

namespace ember::text {

// The special tokens of `full`, then for each word of `corpus` (as full.basic_tokenize splits
// it) its first character as a word-start piece and its other characters as "##" pieces (those
// `full` has), then the pieces full.tokenize gives the corpus, most used first (ties: the lower
// id), up to `size` tokens in all; a piece the corpus never uses is left out even when `size`
// allows it. The tokens keep full's relative order, so [PAD] stays first in BERT's. Throws
// ember::Error when the special tokens and characters alone exceed `size`, naming both counts.
WordPieceTokenizer prune_wordpiece_vocabulary(const WordPieceTokenizer& full, const std::vector<std::string>& corpus,
                                              int64_t size);

}  // namespace ember::text
