// Writing a file so that its readers see either the old one or the whole new one, never half:
// run files, plots, configs and vocabularies are all written so.
//
//   nn::write_file_atomically("out/run/config.json", text);   // creates out/run when missing
#pragma once

#include <string>
#include <string_view>

namespace ember::nn {

// Creates `directory` and its parents when missing. Throws ember::Error naming the directory
// and the OS error when it cannot (a file in the way, no permission).
void create_directory(const std::string& directory);

// Writes `bytes` to `path` so that readers see either the old file or the whole new one,
// never half of it: a temporary file beside `path` is written, flushed and renamed over it.
// Creates the parent directory when missing. Throws ember::Error naming the path on failure,
// and leaves no temporary file behind.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace ember::nn
