// Writes the seed corpus of every fuzz target: files made by ember's own savers (safetensors,
// checkpoints, tokenizers) and small samples of each data set's format, one folder per target.
//
//   write_seeds <corpus folder>     # then <corpus folder>/fuzz_safetensors/..., ...
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ember.h"
#include "nn/text/text.h"
#include "nn/train/metrics_log.h"
#include "training_run.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

fs::path corpus_root;

std::string seed_path(const std::string& target, const std::string& name) {
  fs::create_directories(corpus_root / target);
  return (corpus_root / target / name).string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EMBER_CHECK(out.good(), "write_seeds: cannot write {}", path);
}

void write_safetensors_seeds() {
  nn::StateDict tensors;
  tensors["weight"] = randn({2, 3});
  tensors["bias"] = randn({3}, kFloat64);
  tensors["ids"] = arange(4, kInt64);
  tensors["mask"] = gt(tensor({1.0, 0.0, 1.0}, {3}), 0.5);
  tensors["empty"] = zeros({0, 3});
  tensors["scalar"] = tensor({2.5}, {});
  nn::save_safetensors(seed_path("fuzz_safetensors", "tensors.safetensors"), tensors, {{"format", "pt"}});
  nn::save_safetensors(seed_path("fuzz_safetensors", "nothing.safetensors"), {});
}

void write_checkpoint_seeds() {
  fuzzing::TrainingRun run;
  nn::save_checkpoint(seed_path("fuzz_checkpoint", "step0.safetensors"), *run.model, run.optimizer, &run.scheduler, 0);
  run.step();
  run.step();
  nn::save_checkpoint(seed_path("fuzz_checkpoint", "step2.safetensors"), *run.model, run.optimizer, &run.scheduler, 2);
}

const std::vector<std::string> kCorpus = {
    "The cat sat on the mat.", "A dog barked at the cat!", "Die Insel ist voll von Sommergästen.",
    "naïve café, 東京 and 😀 too", "the the the cat cat mat"};

text::WordPieceTokenizer small_wordpiece(text::WordPieceOptions options = {}) {
  return text::WordPieceTokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat", "on",
                                   "mat", "a", "##t", ".", "!", "un", "##aff", "##able"},
                                  options);
}

void write_tokenizer_seeds() {
  text::WordTokenizer::train(kCorpus).save(seed_path("fuzz_tokenizer_file", "word.json"));
  text::WordTokenizer::train(kCorpus, {.max_vocab_size = 8, .lowercase = true})
      .save(seed_path("fuzz_tokenizer_file", "word_lowercase.json"));
  text::CharTokenizer::train(kCorpus).save(seed_path("fuzz_tokenizer_file", "char.json"));
  text::CharTokenizer::train(kCorpus, {.specials = text::SpecialTokens::none()})
      .save(seed_path("fuzz_tokenizer_file", "char_no_specials.json"));
  small_wordpiece().save(seed_path("fuzz_tokenizer_file", "wordpiece.json"));
  text::BpeTokenizer::train(kCorpus, text::BpeTokenizer::kBaseVocabSize + 12)
      .save(seed_path("fuzz_tokenizer_file", "bpe.json"));

  small_wordpiece().save(seed_path("fuzz_wordpiece_file", "uncased.json"));
  small_wordpiece({.lowercase = false, .max_chars_per_word = 5}).save(seed_path("fuzz_wordpiece_file", "cased.json"));

  text::BpeTokenizer::train(kCorpus, text::BpeTokenizer::kBaseVocabSize + 12)
      .save(seed_path("fuzz_bpe_file", "bpe.json"));
  text::BpeTokenizer::train(kCorpus, text::BpeTokenizer::kBaseVocabSize).save(seed_path("fuzz_bpe_file", "bytes.json"));

  // fuzz_gpt2_text takes text: contractions, runs of spaces and newlines, accents, a malformed byte.
  write_bytes(seed_path("fuzz_gpt2_text", "prose.txt"), "The cat's where the caf\xc3\xa9 is.\n\n  Where's it?  ");
  write_bytes(seed_path("fuzz_gpt2_text", "mixed.txt"), "x = 42;\t// \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x99\x82 \xff end\n");
}

// fuzz_bert_vocab takes a first byte that picks the reader (even: vocab.txt, odd: JSON).
void write_bert_vocab_seeds() {
  const text::WordPieceTokenizer wordpiece = small_wordpiece();
  std::string lines(1, '\0');
  for (const std::string& token : wordpiece.vocabulary().tokens()) lines += token + "\n";
  write_bytes(seed_path("fuzz_bert_vocab", "vocab_txt"), lines);
  // The npm package's notation: "▁x" starts a word, a bare token continues one.
  write_bytes(seed_path("fuzz_bert_vocab", "vocab_json"),
              "\x01[\"[PAD]\", \"[UNK]\", \"[CLS]\", \"[SEP]\", \"[MASK]\", \"▁\", \"▁the\", \"▁cat\", \"s\", "
              "\"▁un\", \"aff\", \"able\", \"!\", \"▁!\"]");
}

void write_data_set_seeds() {
  write_bytes(seed_path("fuzz_cmudict", "dict.txt"),
              ";;; a comment line\n"
              "EMBER  EH1 M B ER0\n"
              "EMBER(1)  EH1 M B ER0\n"
              "A  AH0\n"
              "A.  EY1\n"
              "CAT'S  K AE1 T S\n"
              "NOPHONEMES\n"
              "TOMATO  T AH0 M EY1 T OW2\n");
  write_bytes(seed_path("fuzz_de_en", "de-en.txt"),
              "# Ding format: German :: English\n"
              "Die Insel ist voll von Sommergästen. :: The island is full of summer guests.\n"
              "Ich gehe nach Hause. | Er kommt {m} morgen (bald). :: I am going home. | He comes tomorrow [soon].\n"
              "Haus {n}; Gebäude :: house; building\n"
              "Das ist gut; sehr gut. :: That is good; very good.\n"
              "kein Trenner hier\n");
  write_bytes(seed_path("fuzz_moby_dick", "moby-dick.txt"),
              "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money\n"
              "in my purse, and nothing particular to interest me on shore, I thought I would sail about.\n");
  write_bytes(seed_path("fuzz_sentiment", "sentiment.json"),
              "[{\"text\": \"A wonderful little film.\", \"class\": 1},\n"
              " {\"text\": \"Worst purchase ever.\", \"class\": 0},\n"
              " {\"text\": \"Naïve but charming 😀\", \"class\": 1},\n"
              " {\"text\": 3, \"class\": 1},\n"
              " {\"text\": \"\", \"class\": null}]\n");
}

void write_metrics_seeds() {
  const std::string path = seed_path("fuzz_metrics_csv", "metrics.csv");
  train::MetricsLog log(path, {"train_loss", "val_loss", "lr"});
  log.write(100, {{"train_loss", 2.31}, {"lr", 3e-4}});
  log.write(200, {{"train_loss", 2.05}, {"val_loss", 2.11}, {"lr", 3e-4}});
  log.write(300, {{"train_loss", 1.875}, {"val_loss", -0.0}, {"lr", 1e-30}});
}

// The config.json files of the examples that read sizes back (text_classifier, translation,
// spelling_to_sound), with the keys and kinds they write.
void write_example_config_seeds() {
  write_bytes(seed_path("fuzz_example_config", "text_classifier.json"),
              R"({"d_model": 64, "heads": 4, "layers": 2, "d_ff": 256, "dropout": 0.1, "max_tokens": 64,
  "vocab_size": 5000})");
  write_bytes(seed_path("fuzz_example_config", "translation.json"),
              R"({"vocab_size": 8000, "d_model": 128, "layers": 3, "heads": 4, "d_ff": 512, "dropout": 0.1,
  "label_smoothing": 0.1, "lr": 1.0, "warmup_steps": 4000, "weight_decay": 0.0, "batch_tokens": 4096,
  "total_steps": 12000})");
  write_bytes(seed_path("fuzz_example_config", "spelling_to_sound.json"),
              R"({"model": {"d_model": 128, "heads": 4, "d_ff": 512, "encoder_layers": 3},
  "training": {"total_steps": 9000}, "longest_word": 34})");
}

// JSON nested a hundred thousand levels deep, which once overflowed the stack of the loaders
// that wrote a value back into an error message. Written here rather than kept in
// tests/fuzz/regressions/: each is 200 kB of brackets.
void write_deep_nesting_seeds() {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  write_bytes(seed_path("fuzz_bpe_file", "deep_merges.json"),
              R"({"type": "bpe", "version": 1, "special_tokens": {"pad": "[PAD]", "unk": "[UNK]", "bos": "[BOS]",
  "eos": "[EOS]"}, "merges": [)" + deep + "]}");
  const std::string header = R"({"a":{"dtype":"F32","shape":[)" + deep + R"(],"data_offsets":[0,0]}})";
  std::string length_field;
  for (int i = 0; i < 8; ++i) length_field.push_back(static_cast<char>(uint64_t(header.size()) >> (8 * i)));
  write_bytes(seed_path("fuzz_safetensors", "deep_shape.safetensors"), length_field + header);
  write_bytes(seed_path("fuzz_example_config", "deep_value.json"), "{\"d_model\": " + deep + "}");
}

// fuzz_ops reads bytes as choices: a few seeded random programs to start from.
void write_op_program_seeds() {
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  for (int program = 0; program < 8; ++program) {
    std::string bytes(96, '\0');
    for (char& byte : bytes) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      byte = static_cast<char>(state >> 56);
    }
    write_bytes(seed_path("fuzz_ops", "program" + std::to_string(program)), bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: write_seeds <corpus folder>\n");
    return 2;
  }
  corpus_root = argv[1];
  manual_seed(17);
  write_safetensors_seeds();
  write_checkpoint_seeds();
  write_tokenizer_seeds();
  write_bert_vocab_seeds();
  write_data_set_seeds();
  write_metrics_seeds();
  write_example_config_seeds();
  write_deep_nesting_seeds();
  write_op_program_seeds();
  fmt::print("write_seeds: wrote the seed corpora under {}\n", corpus_root.string());
  return 0;
}
