// Byte-pair encoding: pre-splitting, training with incremental pair counts, and encoding by
// merge rank.
#include "nn/text/bpe.h"

#include <algorithm>
#include <queue>

#include "core/error.h"
#include "nn/text/json_file.h"
#include "nn/text/merge_by_rank.h"
#include "nn/text/unicode.h"

namespace ember::text {

namespace {

constexpr int64_t kMaxCachedPieces = 200'000;

// The inverses of pair_key (nn/text/merge_by_rank.h).
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

// The vocabulary before any merge: the special tokens, then one symbol per byte value.
Vocabulary base_vocabulary() {
  Vocabulary vocabulary;
  for (const std::string& name : SpecialTokens{}.names()) vocabulary.add(name);
  for (int byte = 0; byte < 256; ++byte) vocabulary.add(std::string(1, static_cast<char>(byte)));
  return vocabulary;
}

// The symbol a merge makes: the two byte strings joined. Two different merges can spell the
// same bytes (x+yz and xy+z); they then share one id, so the vocabulary grows by at most one.
int32_t add_merged_symbol(Vocabulary& vocabulary, int64_t left, int64_t right) {
  return static_cast<int32_t>(vocabulary.add(vocabulary.token(left) + vocabulary.token(right)));
}

enum class CharacterKind { kWord, kPunctuation, kWhitespace };

CharacterKind kind_of(char32_t c) {
  if (is_whitespace(c)) return CharacterKind::kWhitespace;
  if (is_punctuation(c)) return CharacterKind::kPunctuation;
  return CharacterKind::kWord;  // letters, digits, symbols, emoji, controls, malformed bytes
}

// A symbol's bytes as readable text: malformed bytes (halves of a character) as <0xHH>.
std::string readable(std::string_view bytes) {
  std::string out;
  for (size_t offset = 0; offset < bytes.size();) {
    const DecodedCodePoint decoded = decode_utf8_at(bytes, offset);
    if (decoded.code_point == kReplacementCharacter && decoded.length == 1) {
      out += fmt::format("<0x{:02X}>", static_cast<unsigned char>(bytes[offset]));
    } else {
      out.append(bytes, offset, decoded.length);
    }
    offset += decoded.length;
  }
  return out;
}

// --- training --------------------------------------------------------------------------------

struct TrainingWord {
  std::vector<int32_t> symbols;
  int64_t count;
};

// The pair counts of every word, kept up to date merge after merge: a merge only visits the
// words that contain its pair and only touches the pairs next to the merged positions, so
// training costs about the number of merged occurrences rather than merges x corpus.
class PairStatistics {
 public:
  explicit PairStatistics(std::vector<TrainingWord> words) : words_(std::move(words)), visited_(words_.size(), -1) {
    for (size_t w = 0; w < words_.size(); ++w) {
      const std::vector<int32_t>& symbols = words_[w].symbols;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const uint64_t pair = pair_key(symbols[i], symbols[i + 1]);
        counts_[pair] += words_[w].count;
        words_with_[pair].push_back(static_cast<int32_t>(w));
      }
    }
    for (const auto& [pair, count] : counts_) queue_.push({count, pair});
  }

  // The most frequent pair and its count (ties: the smaller ids), or a count of 0 when none is left.
  std::pair<uint64_t, int64_t> most_frequent() {
    while (!queue_.empty()) {
      const Candidate top = queue_.top();
      const auto current = counts_.find(top.pair);
      // Counts change after an entry is queued; the stale entries are dropped here.
      if (current != counts_.end() && current->second == top.count) return {top.pair, top.count};
      queue_.pop();
    }
    return {0, 0};
  }

  // Replaces every occurrence of `pair` by `merged` and updates the counts around them.
  void merge(uint64_t pair, int32_t merged, int32_t merge_index) {
    const int32_t left = left_of(pair), right = right_of(pair);
    std::vector<int32_t> candidates = std::move(words_with_[pair]);
    words_with_.erase(pair);
    changed_.clear();
    for (int32_t w : candidates) {
      if (visited_[w] == merge_index) continue;  // listed once per occurrence
      visited_[w] = merge_index;
      merge_in_word(w, left, right, merged);
    }
    counts_.erase(pair);
    std::sort(changed_.begin(), changed_.end());
    changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
    for (uint64_t changed : changed_) {
      const auto found = counts_.find(changed);
      if (found == counts_.end()) continue;
      if (found->second <= 0) {
        counts_.erase(found);
      } else {
        queue_.push({found->second, changed});
      }
    }
  }

 private:
  struct Candidate {
    int64_t count;
    uint64_t pair;
    // For the max-heap: the larger count first, then the smaller pair.
    bool operator<(const Candidate& other) const {
      return count != other.count ? count < other.count : pair > other.pair;
    }
  };

  void merge_in_word(int32_t w, int32_t left, int32_t right, int32_t merged) {
    TrainingWord& word = words_[w];
    const std::vector<int32_t>& old_symbols = word.symbols;
    new_symbols_.clear();
    old_touched_.assign(old_symbols.size(), false);
    new_touched_.clear();
    for (size_t i = 0; i < old_symbols.size();) {
      if (i + 1 < old_symbols.size() && old_symbols[i] == left && old_symbols[i + 1] == right) {
        old_touched_[i] = old_touched_[i + 1] = true;
        new_symbols_.push_back(merged);
        new_touched_.push_back(true);
        i += 2;
      } else {
        new_symbols_.push_back(old_symbols[i]);
        new_touched_.push_back(false);
        i += 1;
      }
    }
    if (new_symbols_.size() == old_symbols.size()) return;  // a stale listing: merged already
    // Pairs away from the merged positions are the same before and after; only the others change.
    for (size_t i = 0; i + 1 < old_symbols.size(); ++i) {
      if (!old_touched_[i] && !old_touched_[i + 1]) continue;
      const uint64_t pair = pair_key(old_symbols[i], old_symbols[i + 1]);
      counts_[pair] -= word.count;
      changed_.push_back(pair);
    }
    for (size_t i = 0; i + 1 < new_symbols_.size(); ++i) {
      if (!new_touched_[i] && !new_touched_[i + 1]) continue;
      const uint64_t pair = pair_key(new_symbols_[i], new_symbols_[i + 1]);
      counts_[pair] += word.count;
      changed_.push_back(pair);
      words_with_[pair].push_back(w);
    }
    word.symbols.swap(new_symbols_);
  }

  std::vector<TrainingWord> words_;
  std::unordered_map<uint64_t, int64_t> counts_;
  std::unordered_map<uint64_t, std::vector<int32_t>> words_with_;
  std::priority_queue<Candidate> queue_;
  std::vector<int32_t> visited_;  // the last merge that visited each word
  // Scratch buffers reused across words.
  std::vector<uint64_t> changed_;
  std::vector<int32_t> new_symbols_;
  std::vector<bool> old_touched_, new_touched_;
};

}  // namespace

std::vector<std::string> BpeTokenizer::pre_split(std::string_view text) {
  std::vector<std::string> pieces;
  size_t piece_start = 0;  // where the next piece starts: a run, or the space before it
  for (size_t offset = 0; offset < text.size();) {
    const CharacterKind kind = kind_of(decode_utf8_at(text, offset).code_point);
    size_t run_end = offset;
    while (run_end < text.size()) {
      const DecodedCodePoint next = decode_utf8_at(text, run_end);
      if (kind_of(next.code_point) != kind) break;
      run_end += next.length;
    }
    if (kind == CharacterKind::kWhitespace && run_end < text.size() && text[run_end - 1] == ' ') {
      // The run's last space marks the start of the word after it.
      if (run_end - 1 > piece_start) pieces.emplace_back(text.substr(piece_start, run_end - 1 - piece_start));
      piece_start = run_end - 1;
    } else {
      pieces.emplace_back(text.substr(piece_start, run_end - piece_start));
      piece_start = run_end;
    }
    offset = run_end;
  }
  return pieces;
}

BpeTokenizer BpeTokenizer::train(const std::vector<std::string>& corpus, int64_t vocab_size,
                                 const BpeOptions& options) {
  EMBER_CHECK(vocab_size >= kBaseVocabSize,
              "BpeTokenizer::train: vocab_size {} is smaller than the {} base symbols (4 special tokens and 256 bytes)",
              vocab_size, kBaseVocabSize);
  EMBER_CHECK(vocab_size <= (int64_t{1} << 31) - 1, "BpeTokenizer::train: vocab_size {} is too large", vocab_size);
  EMBER_CHECK(options.min_pair_frequency >= 1, "BpeTokenizer::train: min_pair_frequency must be at least 1, not {}",
              options.min_pair_frequency);

  std::unordered_map<std::string, int64_t> piece_counts;
  for (const std::string& text : corpus) {
    for (std::string& piece : pre_split(text)) ++piece_counts[std::move(piece)];
  }
  // In byte order, so that word indices, and with them everything after, do not depend on
  // the hash map's iteration order.
  std::vector<std::pair<std::string, int64_t>> sorted_pieces(piece_counts.begin(), piece_counts.end());
  std::sort(sorted_pieces.begin(), sorted_pieces.end());
  std::vector<TrainingWord> words;
  words.reserve(sorted_pieces.size());
  for (const auto& [piece, count] : sorted_pieces) {
    TrainingWord word{{}, count};
    for (unsigned char byte : piece) word.symbols.push_back(static_cast<int32_t>(kFirstByteId + byte));
    words.push_back(std::move(word));
  }

  PairStatistics statistics(std::move(words));
  Vocabulary vocabulary = base_vocabulary();
  std::vector<std::pair<int64_t, int64_t>> merges;
  while (vocabulary.size() < vocab_size) {
    const auto [pair, count] = statistics.most_frequent();
    if (count < options.min_pair_frequency) break;
    const int32_t merged = add_merged_symbol(vocabulary, left_of(pair), right_of(pair));
    statistics.merge(pair, merged, static_cast<int32_t>(merges.size()));
    merges.emplace_back(left_of(pair), right_of(pair));
  }
  return BpeTokenizer(std::move(merges), "BpeTokenizer::train");
}

BpeTokenizer::BpeTokenizer(std::vector<std::pair<int64_t, int64_t>> merges, const std::string& who)
    : Tokenizer(base_vocabulary(), SpecialTokens{}, who), merges_(std::move(merges)) {
  merge_of_pair_.reserve(merges_.size());
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const auto [left, right] = merges_[rank];
    EMBER_CHECK(left >= 0 && left < vocab_size() && right >= 0 && right < vocab_size(),
                "{}: merge {} ({}, {}) refers to a symbol that does not exist before it (the vocabulary has {})", who,
                rank, left, right, vocab_size());
    EMBER_CHECK(left >= kFirstByteId && right >= kFirstByteId, "{}: merge {} ({}, {}) involves a special token", who,
                rank, left, right);
    const int32_t merged = add_merged_symbol(vocabulary_, left, right);
    // A pair learned twice keeps its first (lower) rank.
    merge_of_pair_.emplace(pair_key(static_cast<int32_t>(left), static_cast<int32_t>(right)),
                           RankedMerge{static_cast<int32_t>(rank), merged});
  }
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  const JsonFileReader file(path, "BpeTokenizer::load");
  file.expect_type("bpe");
  if (file.special_tokens().names() != SpecialTokens{}.names()) {
    file.fail_at("special_tokens", "should be [PAD] [UNK] [BOS] [EOS], the fixed special tokens of BPE");
  }
  const nlohmann::json& merge_list = file.array_at("merges");
  std::vector<std::pair<int64_t, int64_t>> merges;
  merges.reserve(merge_list.size());
  for (size_t i = 0; i < merge_list.size(); ++i) {
    const nlohmann::json& merge = merge_list[i];
    const bool pair = merge.is_array() && merge.size() == 2;
    const std::optional<int64_t> left = pair ? json_to_int64(merge[0]) : std::nullopt;
    const std::optional<int64_t> right = pair ? json_to_int64(merge[1]) : std::nullopt;
    if (!left || !right) {
      file.fail_at("merges", fmt::format("element {} should be a pair of symbol ids, not {}", i, merge.dump()));
    }
    merges.emplace_back(*left, *right);
  }
  BpeTokenizer tokenizer = [&] {
    try {
      return BpeTokenizer(std::move(merges), "BpeTokenizer::load");
    } catch (const Error& error) {
      file.fail_at("merges", fmt::format("are inconsistent: {}", error.what()));
    }
  }();
  // The symbols written for readers must be the ones the merges make: otherwise the file was
  // edited or written by something else, and its ids would not mean what a model learned.
  const std::vector<std::string> written = file.strings_at("tokens");
  if (static_cast<int64_t>(written.size()) != tokenizer.vocab_size()) {
    file.fail_at("tokens",
                 fmt::format("lists {} symbols, but the merges make {}", written.size(), tokenizer.vocab_size()));
  }
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string expected =
        id < kFirstByteId ? tokenizer.vocabulary_.token(id) : readable(tokenizer.vocabulary_.token(id));
    if (written[static_cast<size_t>(id)] != expected) {
      file.fail_at("tokens", fmt::format("element {} is '{}', but the merges make '{}'", id,
                                         written[static_cast<size_t>(id)], expected));
    }
  }
  return tokenizer;
}

void BpeTokenizer::save(const std::string& path) const {
  nlohmann::ordered_json document = tokenizer_document(type(), specials_);
  nlohmann::ordered_json merge_list = nlohmann::ordered_json::array();
  for (const auto& [left, right] : merges_) merge_list.push_back({left, right});
  document["merges"] = merge_list;
  std::vector<std::string> tokens;
  tokens.reserve(static_cast<size_t>(vocab_size()));
  for (int64_t id = 0; id < vocab_size(); ++id) {
    tokens.push_back(id < kFirstByteId ? vocabulary_.token(id) : readable(vocabulary_.token(id)));
  }
  document["tokens"] = tokens;
  write_json_file(path, document, "BpeTokenizer::save");
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int64_t>& ids) const {
  std::vector<int32_t> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    symbols[i] = static_cast<int32_t>(kFirstByteId + static_cast<unsigned char>(piece[i]));
  }
  merge_by_rank(symbols, merge_of_pair_);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
}

std::vector<int64_t> BpeTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3);
  std::vector<int64_t> piece_ids;
  for (const std::string& piece : pre_split(text)) {
    {
      std::lock_guard<std::mutex> lock(cache_->mutex);
      const auto cached = cache_->ids_of_piece.find(piece);
      if (cached != cache_->ids_of_piece.end()) {
        ids.insert(ids.end(), cached->second.begin(), cached->second.end());
        continue;
      }
    }
    piece_ids.clear();
    encode_piece(piece, piece_ids);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    std::lock_guard<std::mutex> lock(cache_->mutex);
    // Bounded, for programs that encode an endless stream of new text.
    if (static_cast<int64_t>(cache_->ids_of_piece.size()) >= kMaxCachedPieces) cache_->ids_of_piece.clear();
    cache_->ids_of_piece.emplace(piece, piece_ids);
  }
  return ids;
}

std::vector<std::string> BpeTokenizer::tokenize(const std::string& text) const { return ids_to_tokens(encode(text)); }

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  check_ids(ids, "BpeTokenizer::decode");
  std::string text;
  for (int64_t id : ids) {
    if (!is_structural_id(id)) text += vocabulary_.token(id);
  }
  return text;
}

}  // namespace ember::text
