// What every fuzz target shares: the input bytes become a file (ember's loaders take paths), and
// the loader under test runs on it. ember::Error is the loader's right answer to bad bytes; any
// other exception escapes to libFuzzer, which reports it, as it does crashes, sanitizer reports,
// hangs and runaway memory.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace ember::fuzzing {

// The path of this process's input file, ending in `name` (some loaders look at the name).
// One per process, so that targets and parallel jobs (-jobs=N) do not share one.
inline std::string input_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ember_fuzz_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Writes the fuzzer's bytes to input_path(name) and returns that path. The file is removed when
// the fuzzer exits, so that runs leave nothing behind in the temporary directory.
inline std::string write_input(std::string_view bytes, const std::string& name) {
  static std::string path;
  static const bool removal_registered = std::atexit([] { std::remove(path.c_str()); }) == 0;
  (void)removal_registered;
  path = input_path(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) __builtin_trap();  // the file system, not the loader, failed: stop loudly
  return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `load`; an ember::Error is the expected outcome of bad input and ends the run quietly.
template <class Load>
void expect_success_or_error(Load&& load) {
  try {
    load();
  } catch (const Error&) {
  }
}

}  // namespace ember::fuzzing
