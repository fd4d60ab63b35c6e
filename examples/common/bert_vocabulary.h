// The WordPiece vocabulary a BERT model folder goes with: its own vocab.txt (pretrain_bert
// writes one there, as Hugging Face keeps one beside config.json), or BERT's uncased vocabulary
// from the data folder when the folder has none (a model pretrained on it before vocab.txt
// was written, or a folder name not given).
#pragma once

#include <ember.h>

#include <filesystem>
#include <string>

namespace ember::examples {

inline text::WordPieceTokenizer bert_vocabulary(const std::string& data_dir, const std::string& model_folder) {
  const std::filesystem::path own = std::filesystem::path(model_folder) / "vocab.txt";
  if (!model_folder.empty() && std::filesystem::exists(own)) return text::WordPieceTokenizer::from_vocab_txt(own.string());
  return text::WordPieceTokenizer::from_bert_vocab_json(datasets::data_path(data_dir, "bert-vocab", "bert/vocab.json"));
}

}  // namespace ember::examples
