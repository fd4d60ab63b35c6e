// Packing documents into sequences, and BERT's choice and corruption of the positions to predict.
#include "nn/data/masked_lm.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

namespace ember::datasets {

std::vector<std::vector<int64_t>> pack_sequences(const std::vector<std::vector<int64_t>>& documents, int64_t length,
                                                 int64_t cls_id, int64_t sep_id) {
  EMBER_CHECK(length >= 3, "pack_sequences: a length of {} leaves no room between [CLS] and [SEP]", length);
  std::vector<std::vector<int64_t>> sequences;
  std::vector<int64_t> current{cls_id};
  const auto add = [&](int64_t id) {
    current.push_back(id);
    if (static_cast<int64_t>(current.size()) == length - 1) {
      current.push_back(sep_id);
      sequences.push_back(std::move(current));
      current = {cls_id};
    }
  };
  for (size_t d = 0; d < documents.size(); ++d) {
    if (documents[d].empty()) continue;
    // Between documents a [SEP], unless the sequence has just begun.
    if (current.size() > 1) add(sep_id);
    for (const int64_t id : documents[d]) add(id);
  }
  return sequences;
}

MaskingOptions MaskingOptions::for_tokenizer(const text::WordPieceTokenizer& tokenizer, bool whole_words) {
  const std::optional<int64_t> mask = tokenizer.mask_id();
  EMBER_CHECK(mask.has_value(), "MaskingOptions::for_tokenizer: the vocabulary of {} pieces has no [MASK]",
              tokenizer.vocab_size());
  // Random replacements come from the real word pieces, after the bracketed entries ([PAD],
  // [unused*], [UNK], [CLS], [SEP], [MASK]) that come first.
  int64_t first_real_piece = 0;
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_bracketed(id)) first_real_piece = id + 1;
  }
  EMBER_CHECK(first_real_piece < tokenizer.vocab_size(), "MaskingOptions::for_tokenizer: the vocabulary of {} pieces "
              "has no piece after its bracketed entries to draw random replacements from", tokenizer.vocab_size());
  MaskingOptions options;
  options.vocab_size = tokenizer.vocab_size();
  options.first_random_id = first_real_piece;
  options.mask_id = *mask;
  for (const std::optional<int64_t> structural : {tokenizer.cls_id(), tokenizer.sep_id(), tokenizer.pad_id()}) {
    if (structural) options.never_chosen.push_back(*structural);
  }
  if (whole_words) {
    options.continues_word.reserve(static_cast<size_t>(tokenizer.vocab_size()));
    for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) options.continues_word.push_back(tokenizer.is_continuation(id));
  }
  return options;
}

void MaskedBatch::append(const MaskedSequence& sequence) {
  const int64_t size = static_cast<int64_t>(sequence.inputs.size());
  EMBER_CHECK(sequence.labels.size() == sequence.inputs.size(), "MaskedBatch::append: {} inputs but {} labels", size,
              sequence.labels.size());
  if (rows == 0) length = size;
  EMBER_CHECK(size == length, "MaskedBatch::append: a sequence of {} ids in a batch of rows of {}", size, length);
  for (int64_t t = 0; t < size; ++t) {
    if (sequence.labels[static_cast<size_t>(t)] != kIgnoreIndex) positions.push_back(rows * length + t);
  }
  inputs.insert(inputs.end(), sequence.inputs.begin(), sequence.inputs.end());
  labels.insert(labels.end(), sequence.labels.begin(), sequence.labels.end());
  ++rows;
}

namespace {

// splitmix64: a counter-based stream of 64-bit words, the same on every platform (the standard
// library's distributions are not).
uint64_t next_word(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double next_uniform(uint64_t& state) { return static_cast<double>(next_word(state) >> 11) * 0x1.0p-53; }

}  // namespace

MaskedSequence mask_for_mlm(const std::vector<int64_t>& ids, const MaskingOptions& options, uint64_t seed) {
  const auto probability = [](double p) { return p >= 0 && p <= 1; };
  EMBER_CHECK(probability(options.choose) && probability(options.as_mask) && probability(options.as_random) &&
                  options.as_mask + options.as_random <= 1,
              "mask_for_mlm: choose {}, as_mask {} and as_random {} must be probabilities, as_mask + as_random <= 1",
              options.choose, options.as_mask, options.as_random);
  EMBER_CHECK(options.first_random_id >= 0 && options.first_random_id < options.vocab_size,
              "mask_for_mlm: random replacements from [{}, {}) is an empty range", options.first_random_id,
              options.vocab_size);
  const bool whole_words = !options.continues_word.empty();
  EMBER_CHECK(!whole_words || static_cast<int64_t>(options.continues_word.size()) == options.vocab_size,
              "mask_for_mlm: continues_word has {} entries for a vocabulary of {}", options.continues_word.size(),
              options.vocab_size);
  MaskedSequence out{ids, std::vector<int64_t>(ids.size(), kIgnoreIndex)};
  uint64_t state = seed;
  bool word_chosen = false;        // whether the word the current piece belongs to is chosen
  bool after_structure = true;     // the piece before was [CLS], [SEP] or [PAD], or there was none
  for (size_t i = 0; i < ids.size(); ++i) {
    // Three draws for every position, chosen or not: position i's fate does not depend on the
    // positions before it (with whole words, only on where its word began).
    const double pick = next_uniform(state), how = next_uniform(state);
    const uint64_t random_word = next_word(state);
    const bool structural =
        std::find(options.never_chosen.begin(), options.never_chosen.end(), ids[i]) != options.never_chosen.end();
    if (whole_words) {
      EMBER_CHECK(ids[i] >= 0 && ids[i] < options.vocab_size,
                  "mask_for_mlm: id {} at position {} is outside the vocabulary of {}", ids[i], i, options.vocab_size);
      // A continuation piece goes with its word. Right after [CLS] or [SEP] its word began in
      // another sequence, so it starts one of its own.
      const bool continues = !structural && !after_structure && options.continues_word[static_cast<size_t>(ids[i])];
      if (!continues) word_chosen = !structural && pick < options.choose;
      after_structure = structural;
      if (!word_chosen) continue;
    } else if (structural || pick >= options.choose) {
      continue;
    }
    out.labels[i] = ids[i];
    if (how < options.as_mask) {
      out.inputs[i] = options.mask_id;
    } else if (how < options.as_mask + options.as_random) {
      const uint64_t span = static_cast<uint64_t>(options.vocab_size - options.first_random_id);
      out.inputs[i] = options.first_random_id + static_cast<int64_t>(random_word % span);
    }
  }
  return out;
}

}  // namespace ember::datasets
