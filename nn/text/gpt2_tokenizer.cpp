// GPT-2's byte-level BPE: the byte <-> character table of its files, its pre-tokenising pattern
// written out by hand, loading and checking its files, and encoding by merge rank.
#include "nn/text/gpt2_tokenizer.h"

#include <fstream>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "nn/io/regular_file.h"
#include "nn/text/gpt2_character_classes.h"
#include "nn/text/json_file.h"
#include "nn/text/merge_by_rank.h"
#include "nn/text/unicode.h"

namespace ember::text {

namespace {

// Pieces longer than this are encoded without being cached: a megabyte of dashes is seen once,
// and would only crowd out the words that repeat.
constexpr size_t kMaxCachedPieceBytes = 256;
// Bounded, for programs that encode an endless stream of new text.
constexpr size_t kMaxCachedPieces = 1'000'000;

// GPT-2's byte table: the bytes that are printable characters of Latin-1 ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves; the other 68 (controls, space, DEL, no-break space, soft
// hyphen) get U+0100, U+0101, ... in byte order, so that every byte is one visible character.
struct ByteTable {
  std::array<char32_t, 256> character_of_byte{};
  std::unordered_map<char32_t, unsigned char> byte_of_character;

  ByteTable() {
    const auto stands_for_itself = [](int byte) {
      return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
    };
    char32_t next_unprintable = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      character_of_byte[byte] = stands_for_itself(byte) ? static_cast<char32_t>(byte) : next_unprintable++;
      byte_of_character.emplace(character_of_byte[byte], static_cast<unsigned char>(byte));
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

// A token in GPT-2's notation back to the bytes it stands for; nullopt when it holds a character
// that stands for no byte.
std::optional<std::string> notation_to_bytes(std::string_view token, char32_t* stray = nullptr) {
  const ByteTable& table = byte_table();
  std::string bytes;
  for (const char32_t c : decode_utf8(token)) {
    const auto found = table.byte_of_character.find(c);
    if (found == table.byte_of_character.end()) {
      if (stray) *stray = c;
      return std::nullopt;
    }
    bytes.push_back(static_cast<char>(found->second));
  }
  return bytes;
}

std::string bytes_to_notation(std::string_view bytes) {
  std::string token;
  for (const unsigned char byte : bytes) append_utf8(token, byte_table().character_of_byte[byte]);
  return token;
}

// --- the pre-tokenising pattern ----------------------------------------------------------------

struct Character {
  Gpt2CharacterClass kind;
  size_t length;  // in bytes
};

// The character at `offset`. A malformed byte is a character of one byte and of the "other"
// class, like U+FFFD, which is what the reference encoder sees in its place.
Character character_at(std::string_view text, size_t offset) {
  const unsigned char byte = static_cast<unsigned char>(text[offset]);
  if (byte < 0x80) return {gpt2_character_class(byte), 1};
  const DecodedCodePoint decoded = decode_utf8_at(text, offset);
  return {gpt2_character_class(decoded.code_point), decoded.length};
}

// The length of the piece that starts at `start`, by the pattern's alternatives in their order:
// the first that matches wins, as in a backtracking regular expression engine.
size_t piece_length_at(std::string_view text, size_t start) {
  const std::string_view rest = text.substr(start);
  // 's 't 're 've 'm 'll 'd: lower case only, so "'S" falls through to the punctuation run.
  if (rest[0] == '\'' && rest.size() >= 2) {
    for (const std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      if (rest.substr(1, suffix.size()) == suffix) return 1 + suffix.size();
    }
  }
  const Character first = character_at(text, start);
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a run of one class, with at most one space
  // (U+0020, not any whitespace) in front.
  size_t run_start = start;
  Gpt2CharacterClass run_kind = first.kind;
  if (rest[0] == ' ' && rest.size() >= 2) {
    const Character second = character_at(text, start + 1);
    if (second.kind != Gpt2CharacterClass::kWhitespace) {
      run_start = start + 1;
      run_kind = second.kind;
    }
  }
  size_t end = run_start;
  if (run_kind != Gpt2CharacterClass::kWhitespace) {
    while (end < text.size()) {
      const Character next = character_at(text, end);
      if (next.kind != run_kind) break;
      end += next.length;
    }
    return end - start;
  }
  // "\s+(?!\S)" then "\s+": the whole whitespace run when it ends the text; otherwise the run
  // without its last character, which a non-space follows, so that the last character can start
  // the next piece (" world" after "hello  "). A run of one character before a non-space cannot
  // give one up and matches whole, by the last alternative.
  size_t last_start = start;
  while (end < text.size()) {
    const Character next = character_at(text, end);
    if (next.kind != Gpt2CharacterClass::kWhitespace) break;
    last_start = end;
    end += next.length;
  }
  if (end == text.size() || last_start == start) return end - start;
  return last_start - start;
}

// Calls `visit(piece)` for each piece of `text`, in order.
template <class Visit>
void for_each_piece(std::string_view text, Visit&& visit) {
  for (size_t start = 0; start < text.size();) {
    const size_t length = piece_length_at(text, start);
    visit(text.substr(start, length));
    start += length;
  }
}

// --- reading the files ---------------------------------------------------------------------------

std::string read_text_file(const std::string& path, const std::string& who) {
  check_regular_file(path, who);
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("{}: cannot open '{}': {}", who, path, std::error_code(errno, std::generic_category()).message());
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// vocab.bpe: a "#version: 0.2" line, then "left right" per line; a trailing newline ends the file.
std::vector<std::pair<std::string, std::string>> read_merge_lines(const std::string& path, const std::string& who) {
  const std::string text = read_text_file(path, who);
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written on Windows
    lines.push_back(std::move(line));
  }
  EMBER_CHECK(!lines.empty() && lines[0].starts_with("#version"),
              "{}: '{}': line 1 should be the header '#version: 0.2' of a GPT-2 merges file, not '{}'", who, path,
              to_valid_utf8(lines.empty() ? std::string() : lines[0].substr(0, 80)));
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(lines.size());
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const size_t space = line.find(' ');
    EMBER_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                    line.find(' ', space + 1) == std::string::npos,
                "{}: '{}': line {} should be two symbols separated by one space, not '{}'", who, path, i + 1,
                to_valid_utf8(line.substr(0, 80)));
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return merges;
}

}  // namespace

struct Gpt2Tokenizer::PieceCache {
  std::shared_mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>> ids_of_piece;
};

char32_t Gpt2Tokenizer::byte_to_symbol_character(unsigned char byte) { return byte_table().character_of_byte[byte]; }

std::vector<std::string> Gpt2Tokenizer::pre_tokenize(std::string_view text) {
  std::vector<std::string> pieces;
  for_each_piece(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

Gpt2Tokenizer::Gpt2Tokenizer(Vocabulary vocabulary)
    : Tokenizer(
          std::move(vocabulary),
          SpecialTokens{.pad = "", .unk = "", .bos = kEndOfText, .eos = kEndOfText, .cls = "", .sep = "", .mask = ""},
          "Gpt2Tokenizer"),
      cache_(std::make_shared<PieceCache>()) {}

template <class WhereToken, class WhereMerge>
Gpt2Tokenizer Gpt2Tokenizer::build(std::vector<std::string> tokens,
                                   const std::vector<std::pair<std::string, std::string>>& merges,
                                   const WhereToken& where_token, const WhereMerge& where_merge) {
  const std::string who = "Gpt2Tokenizer::load";
  // Each token's bytes; checked before the Vocabulary is built so that the error names the token.
  std::vector<std::string> bytes_of_id(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id] == kEndOfText) {
      bytes_of_id[id] = kEndOfText;
      continue;
    }
    char32_t stray = 0;
    std::optional<std::string> bytes = notation_to_bytes(tokens[id], &stray);
    EMBER_CHECK(bytes && !bytes->empty(), "{}: {}: token '{}' (id {}) {}", who, where_token(id), tokens[id], id,
                bytes ? "is empty"
                      : fmt::format("holds {}, which stands for no byte in GPT-2's notation", code_point_name(stray)));
    bytes_of_id[id] = std::move(*bytes);
  }
  Vocabulary vocabulary = [&] {
    try {
      return Vocabulary(tokens);
    } catch (const Error& error) {
      fail("{}: {}: {}", who, where_token(0), error.what());
    }
  }();
  const std::optional<int64_t> end_of_text = vocabulary.find(kEndOfText);
  EMBER_CHECK(end_of_text, "{}: {}: has no token '{}'", who, where_token(0), kEndOfText);

  Gpt2Tokenizer tokenizer(std::move(vocabulary));
  tokenizer.end_of_text_id_ = *end_of_text;
  const Vocabulary& known = tokenizer.vocabulary_;
  // made_by[id]: -1 for a byte, the merge's rank for a merge's result, -2 for what nothing made yet.
  std::vector<int64_t> made_by(tokens.size(), -2);
  for (int byte = 0; byte < 256; ++byte) {
    const std::string symbol = bytes_to_notation(std::string(1, static_cast<char>(byte)));
    const std::optional<int64_t> id = known.find(symbol);
    EMBER_CHECK(id, "{}: {}: has no token '{}' for byte 0x{:02X}; every byte needs one", who, where_token(0), symbol,
                byte);
    tokenizer.byte_symbol_ids_[byte] = static_cast<int32_t>(*id);
    made_by[*id] = -1;
  }
  const auto id_of = [&](const std::string& symbol, size_t rank) {
    const std::optional<int64_t> id = known.find(symbol);
    EMBER_CHECK(id, "{}: {}: symbol '{}' is not a token of {}", who, where_merge(rank), symbol, where_token(0));
    EMBER_CHECK(made_by[*id] != -2 && made_by[*id] < static_cast<int64_t>(rank),
                "{}: {}: symbol '{}' is used before any merge makes it (a merge may only join bytes or the "
                "results of earlier merges)",
                who, where_merge(rank), symbol);
    return static_cast<int32_t>(*id);
  };
  // Pairs are keyed by the two ids, as GPT-2's Python encoder keys them by the tuple. (The npm
  // encoder keys them by the string "left,right", so two pairs whose symbols hold commas could
  // share a key; its ids and these agree on every string tried, tests/golden/gpt2_tokens.json's
  // runs of commas and quotes included.)
  tokenizer.merge_pairs_.reserve(merges.size());
  tokenizer.merge_of_pair_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left_symbol, right_symbol] = merges[rank];
    const int32_t left = id_of(left_symbol, rank), right = id_of(right_symbol, rank);
    const std::optional<int64_t> result = known.find(left_symbol + right_symbol);
    EMBER_CHECK(result, "{}: {}: the merged symbol '{}' is not a token of {}", who, where_merge(rank),
                left_symbol + right_symbol, where_token(0));
    EMBER_CHECK(made_by[*result] == -2, "{}: {}: makes '{}', which {} already makes", who, where_merge(rank),
                left_symbol + right_symbol,
                made_by[*result] == -1 ? std::string("a byte") : where_merge(static_cast<size_t>(made_by[*result])));
    made_by[*result] = static_cast<int64_t>(rank);
    tokenizer.merge_pairs_.emplace_back(left, right);
    tokenizer.merge_of_pair_.emplace(pair_key(left, right),
                                     RankedMerge{static_cast<int32_t>(rank), static_cast<int32_t>(*result)});
  }
  // Every token is a byte, one merge's result or <|endoftext|>: a token nothing makes could never
  // be produced, and its id would mean something else to a model trained on GPT-2's.
  const size_t expected = 256 + merges.size() + 1;
  EMBER_CHECK(tokens.size() == expected,
              "{}: {} has {} tokens, but the 256 bytes, the {} merges and {} make {} (GPT-2's files: {})", who,
              where_token(0), tokens.size(), merges.size(), kEndOfText, expected, kGpt2VocabSize);
  tokenizer.bytes_of_id_ = std::move(bytes_of_id);
  return tokenizer;
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  const std::string who = "Gpt2Tokenizer::load";
  const nlohmann::json encoder = read_json_file(encoder_json_path, who);
  EMBER_CHECK(encoder.is_object(), "{}: '{}' should be a JSON object of token -> id, not a JSON {}", who,
              encoder_json_path, encoder.type_name());
  // Ids must be 0 .. size-1, each once.
  std::vector<std::string> tokens(encoder.size());
  std::vector<bool> seen(encoder.size(), false);
  for (const auto& [token, value] : encoder.items()) {
    const std::optional<int64_t> id = json_to_int64(value);
    EMBER_CHECK(id && *id >= 0 && *id < static_cast<int64_t>(tokens.size()),
                "{}: '{}': key '{}' should have an id in [0, {}) (the number of tokens), not {}", who,
                encoder_json_path, token, tokens.size(), json_value_for_error(value));
    EMBER_CHECK(!seen[*id], "{}: '{}': key '{}' has id {}, which key '{}' has too", who, encoder_json_path, token, *id,
                tokens[*id]);
    seen[*id] = true;
    tokens[*id] = token;
  }
  const auto merges = read_merge_lines(vocab_bpe_path, who);
  return build(
      std::move(tokens), merges, [&](size_t) { return fmt::format("'{}'", encoder_json_path); },
      [&](size_t rank) { return fmt::format("'{}': line {}", vocab_bpe_path, rank + 2); });
}

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& path) {
  const JsonFileReader file(path, "Gpt2Tokenizer::load");
  file.expect_type("gpt2");
  std::vector<std::string> tokens = file.strings_at("tokens");
  std::vector<std::pair<std::string, std::string>> merges;
  const std::vector<std::string> merge_lines = file.strings_at("merges");
  for (size_t i = 0; i < merge_lines.size(); ++i) {
    const size_t space = merge_lines[i].find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == merge_lines[i].size() ||
        merge_lines[i].find(' ', space + 1) != std::string::npos) {
      file.fail_at("merges",
                   fmt::format("element {} should be two symbols separated by one space, not '{}'", i, merge_lines[i]));
    }
    merges.emplace_back(merge_lines[i].substr(0, space), merge_lines[i].substr(space + 1));
  }
  return build(
      std::move(tokens), merges, [&](size_t) { return fmt::format("'{}': key 'tokens'", path); },
      [&](size_t rank) { return fmt::format("'{}': key 'merges' element {}", path, rank); });
}

void Gpt2Tokenizer::save(const std::string& path) const {
  nlohmann::ordered_json document = tokenizer_document(type(), specials_);
  document["tokens"] = vocabulary_.tokens();
  std::vector<std::string> merge_lines;
  merge_lines.reserve(merge_pairs_.size());
  for (const auto& [left, right] : merge_pairs_)
    merge_lines.push_back(vocabulary_.token(left) + " " + vocabulary_.token(right));
  document["merges"] = merge_lines;
  write_json_file(path, document, "Gpt2Tokenizer::save");
}

std::vector<std::pair<std::string, std::string>> Gpt2Tokenizer::merges() const {
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merge_pairs_.size());
  for (const auto& [left, right] : merge_pairs_) pairs.emplace_back(vocabulary_.token(left), vocabulary_.token(right));
  return pairs;
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  std::vector<int32_t> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_symbol_ids_[static_cast<unsigned char>(piece[i])];
  merge_by_rank(symbols, merge_of_pair_);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
}

std::vector<int64_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 4);
  std::vector<int32_t> piece_ids;
  std::string key;
  for_each_piece(text, [&](std::string_view piece) {
    if (piece.size() > kMaxCachedPieceBytes) {
      piece_ids.clear();
      encode_piece(piece, piece_ids);
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
      return;
    }
    key.assign(piece);
    {
      std::shared_lock lock(cache_->mutex);
      const auto cached = cache_->ids_of_piece.find(key);
      if (cached != cache_->ids_of_piece.end()) {
        ids.insert(ids.end(), cached->second.begin(), cached->second.end());
        return;
      }
    }
    piece_ids.clear();
    encode_piece(piece, piece_ids);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    std::unique_lock lock(cache_->mutex);
    if (cache_->ids_of_piece.size() >= kMaxCachedPieces) cache_->ids_of_piece.clear();
    cache_->ids_of_piece.emplace(key, piece_ids);
  });
  return ids;
}

std::string Gpt2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  check_ids(ids, "Gpt2Tokenizer::decode");
  std::string text;
  for (const int64_t id : ids) {
    if (id != end_of_text_id_) text += bytes_of_id_[static_cast<size_t>(id)];
  }
  return text;
}

}  // namespace ember::text
