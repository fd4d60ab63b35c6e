// Masked-language-model training data as BERT makes it (Devlin et al., 2019, section 3.1):
// documents packed into fixed-length sequences, then 15% of each sequence's word pieces chosen
// for prediction, of which 80% become [MASK], 10% a random word piece and 10% stay as they are.
// The model sees the corrupted sequence and is scored on the chosen positions only, so it must
// use the context on both sides; the random and kept ones stop it from trusting that an
// unmasked token is always right.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ops/cross_entropy.h"
#include "nn/text/wordpiece.h"

namespace ember::datasets {

// Packs the documents' word pieces, one after another with [SEP] between documents, into
// sequences of exactly `length` ids: [CLS], length - 2 word pieces, [SEP]. Text runs on from
// one sequence into the next, so no piece is lost to padding; a last sequence too short to fill
// is dropped. Throws ember::Error when length < 3.
std::vector<std::vector<int64_t>> pack_sequences(const std::vector<std::vector<int64_t>>& documents, int64_t length,
                                                 int64_t cls_id, int64_t sep_id);

struct MaskingOptions {
  int64_t vocab_size = 0;              // random replacements come from [first_random_id, vocab_size)
  int64_t first_random_id = 0;         // past the special and unused entries of the vocabulary
  int64_t mask_id = 0;                 // [MASK]
  std::vector<int64_t> never_chosen{};  // [CLS], [SEP], [PAD]: structure, not text
  double choose = 0.15;                // of the other positions
  double as_mask = 0.8, as_random = 0.1;  // of the chosen ones; the rest keep their piece
  // Whole-word masking when not empty: continues_word[id] is true for a piece that carries on
  // the word before it (WordPiece's "##" pieces), and such a piece is chosen exactly when the
  // piece before it is, so a word is hidden whole or not at all; right after a never_chosen id
  // ([CLS], [SEP]) its word began in another sequence, and it starts a word of its own. Without
  // it, "disappoint" beside a visible "##ing" is guessed from the spelling, not from the
  // sentence. Indexed by id, so its size must be vocab_size.
  std::vector<bool> continues_word{};

  // BERT's masking of `tokenizer`'s ids: its [MASK] as mask_id (which the vocabulary must have);
  // its [CLS], [SEP] and [PAD] never chosen; random replacements from the pieces after the last
  // bracketed entry (WordPieceTokenizer::is_bracketed: ids 999 on in BERT's vocabulary, past its
  // [unusedN] placeholders); with whole_words, continues_word from the tokenizer's continuation
  // pieces. Throws ember::Error when the vocabulary has no [MASK] or no piece after its bracketed
  // entries.
  static MaskingOptions for_tokenizer(const text::WordPieceTokenizer& tokenizer, bool whole_words = false);
};

struct MaskedSequence {
  std::vector<int64_t> inputs;  // what the model reads
  std::vector<int64_t> labels;  // the original piece where chosen, kIgnoreIndex elsewhere
};

// Masked sequences of one length stacked row by row into a batch, on the host, with the positions
// the loss is taken at: found here, while the batch is built, so that the training step never
// reads the labels back from the device (nn::BertForMaskedLM::loss_from_states takes them).
struct MaskedBatch {
  int64_t rows = 0;
  int64_t length = 0;              // of every row: the first one's
  std::vector<int64_t> inputs;     // [rows * length]
  std::vector<int64_t> labels;     // [rows * length]
  std::vector<int64_t> positions;  // where labels is not kIgnoreIndex, into the flattened [rows * length]

  // Appends `sequence` as the next row. Throws ember::Error when its length differs from the
  // first row's, or its inputs and labels differ in length.
  void append(const MaskedSequence& sequence);
};

// Chooses and corrupts positions of `ids` with draws determined by `seed` alone, so a run is
// repeatable and a resumed run masks as the uninterrupted one did. Every position is chosen
// independently with probability `choose` (with continues_word, every word). Throws ember::Error
// for probabilities outside [0, 1] or as_mask + as_random > 1, for an empty random range, for
// continues_word of the wrong size and for an id outside the vocabulary when continues_word is
// given.
MaskedSequence mask_for_mlm(const std::vector<int64_t>& ids, const MaskingOptions& options, uint64_t seed);

}  // namespace ember::datasets
