// safetensors files: named tensors and string metadata in the format PyTorch and Hugging Face
// tools read and write, plus save/load of a module's state dict through it.
//
//   nn::save(model, "model.safetensors");
//   nn::load(fresh_model, "model.safetensors");  // strict: every key must match
//
// The layout: an 8-byte little-endian header length N, N bytes of JSON mapping each tensor
// name to {"dtype", "shape", "data_offsets"} (plus an optional "__metadata__" object of
// strings), then the raw little-endian data of every tensor, back to back.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "nn/modules/module.h"

namespace ember::nn {

// Writes `tensors` (any device, any layout: each is written from a contiguous CPU copy) and
// `metadata` to `path`. The write is atomic: a temporary file in the same directory is
// renamed over `path` once complete, so readers never see a half-written file. Throws
// ember::Error naming the path and the OS error on failure.
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// For tests of interrupted writes: when set, save_safetensors calls it with the temporary
// file's path once that file is complete and flushed, right before renaming it over the
// target. A test stops the process there to show what a crash between write and rename leaves
// behind. Empty in normal use.
inline std::function<void(const std::string& temporary_path)> before_rename_for_tests;

// Reads every tensor of a safetensors file into CPU tensors; fills `metadata` when given.
// Reads F32, F64, BF16, F16, I64 and BOOL; any malformed file throws ember::Error naming the
// file, the problem and the tensor involved.
StateDict load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

// module.state_dict() to a safetensors file.
void save(const Module& module, const std::string& path);
// A safetensors file into module.load_state_dict(..., strict): missing or unexpected keys
// and shape mismatches throw from there.
void load(Module& module, const std::string& path, bool strict = true);

}  // namespace ember::nn
