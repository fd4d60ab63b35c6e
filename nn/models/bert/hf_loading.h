// Loading a Hugging Face BERT checkpoint (model.safetensors) into ember's BERT modules, with the
// renamings real checkpoint files need.
#pragma once

#include <string>
#include <vector>

#include "nn/models/hf_checkpoint.h"
#include "nn/modules/module.h"

namespace ember::nn {

// What a checkpoint supplied and lacked, after Hugging Face's renamings: old LayerNorm names
// ("gamma", "beta"), the "bert." prefix added or removed between a base model and a model with
// a head, and the tied decoder weight.
using BertLoadReport = CheckpointLoadReport;

// Loads folder/model.safetensors into `model` (a BertModel or a Bert* with a head). Keys the
// module has and the file lacks are allowed only if they start with one of `may_be_missing` (a
// fresh head); any other missing key, and every shape mismatch, is an Error naming the keys.
// Unexpected keys (another task's head, a pooler the module does not use) are reported, not
// refused, as Hugging Face does. A model.safetensors that is not a regular file is refused.
BertLoadReport load_bert_weights(Module& model, const std::string& folder,
                                 const std::vector<std::string>& may_be_missing = {});

}  // namespace ember::nn
