// Loading a Hugging Face checkpoint's tensors into an ember model, once a model's own loader has
// renamed the file's keys to the module's names: what every model's from_pretrained shares.
#pragma once

#include <string>
#include <vector>

#include "nn/modules/module.h"

namespace ember::nn {

// What a checkpoint supplied and lacked, after the model's renamings.
struct CheckpointLoadReport {
  std::vector<std::string> missing;     // the module's keys the file lacks (left as initialised)
  std::vector<std::string> unexpected;  // the file's keys the module does not have (ignored)
};

// Copies `file` (tensors read from `path`, already under the module's names) into `model`.
// Keys the module has and the file lacks are allowed only if they start with one of
// `may_be_missing` (a fresh head); any other missing key, and every shape mismatch, is an Error
// that names `who`, the path and the keys (with both shapes). Unexpected keys are reported, not
// refused, as Hugging Face does.
CheckpointLoadReport load_checkpoint_tensors(Module& model, const StateDict& file, const std::string& path,
                                             const std::string& who,
                                             const std::vector<std::string>& may_be_missing = {});

}  // namespace ember::nn
