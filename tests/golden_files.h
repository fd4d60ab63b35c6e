// The golden files of tests/golden/: tensors a PyTorch script wrote (make_*_golden.py), read once
// per suite, and the checkpoint folders beside them.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "ember.h"
#include "nn/io/safetensors.h"

namespace ember::testing {

// tests/golden/<name> in the source tree.
inline std::string golden_path(const std::string& name) {
  return std::string(EMBER_SOURCE_DIR) + "/tests/golden/" + name;
}

// The tensors of one golden safetensors file.
class GoldenTensors {
 public:
  explicit GoldenTensors(const std::string& file) : tensors_(nn::load_safetensors(golden_path(file))), file_(file) {}

  // The tensor under `key`; a key the file lacks fails the test, naming it.
  const Tensor& at(const std::string& key) const {
    const auto found = tensors_.find(key);
    if (found == tensors_.end()) FAIL(file_ << " has no tensor '" << key << "'");
    return found->second;
  }
  const nn::StateDict& all() const { return tensors_; }

 private:
  nn::StateDict tensors_;
  std::string file_;
};

}  // namespace ember::testing
