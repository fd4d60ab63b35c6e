// An example's main(): parse the command line, run the body, turn every failure into
// "error: <message>" on stderr and a non-zero exit code (never a crash), and at the end say
// which files the run wrote.
//
//   int main(int argc, char** argv) {
//     CLI::App app{"..."};
//     examples::CommonOptions common;
//     examples::add_common_options(app, common);
//     return examples::run_main(app, argc, argv, common, [&] { ... });
//   }
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "core/distributed/process_group.h"
#include "core/error.h"
#include "options.h"

namespace ember::examples {

// The exit code of a run that failed with an exception (CLI11's own codes are kept for
// command-line errors: 0 for --help).
inline constexpr int kFailureExitCode = 1;

// Files under `directory` written at or after `since`, sorted by path.
inline std::vector<std::filesystem::path> files_written_since(const std::string& directory,
                                                              std::filesystem::file_time_type since) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) return files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(directory, error)) {
    if (entry.is_regular_file(error) && entry.last_write_time(error) >= since) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// "812 B", "2.3 kB", "45.1 MB".
inline std::string size_text(uintmax_t bytes) {
  if (bytes < 1000) return fmt::format("{} B", bytes);
  if (bytes < 1000 * 1000) return fmt::format("{:.1f} kB", static_cast<double>(bytes) / 1e3);
  return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6);
}

// Parses argc/argv into `app`, then calls body() (which returns void, or an int exit code).
// A command-line error prints "error: ..." and returns CLI11's exit code; --help prints the
// help and returns 0; an exception from body prints "error: <what>" and returns 1.
template <class Body>
int run_main(CLI::App& app, int argc, char** argv, Body&& body) {
  app.failure_message([](const CLI::App*, const CLI::Error& error) {
    return fmt::format("error: {}\nRun with --help for more information.\n", error.what());
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  std::string failure;
  try {
    if constexpr (std::is_convertible_v<std::invoke_result_t<Body>, int>) {
      return body();
    } else {
      body();
      return 0;
    }
  } catch (const std::exception& error) {  // ember::Error for bad input: the message says what and where
    failure = error.what();
  } catch (...) {
    failure = "unknown exception";
  }
  std::cout << std::flush;
  // In a data-parallel job the other ranks would wait for this one forever: end the whole job.
  if (distributed::is_initialized() && distributed::world_size() > 1) {
    distributed::abort("error: " + failure, kFailureExitCode);
  }
  std::cerr << "error: " << failure << '\n';
  return kFailureExitCode;
}

// As above, and when body succeeds, lists the files it wrote under common.out_dir.
template <class Body>
int run_main(CLI::App& app, int argc, char** argv, const CommonOptions& common, Body&& body) {
  // A second early: a file system's clock ticks coarsely, so a file written just after this
  // line may carry a time stamp a little before it.
  const auto start = std::filesystem::file_time_type::clock::now() - std::chrono::seconds(1);
  bool body_ran = false;
  const int code = run_main(app, argc, argv, [&]() -> int {
    body_ran = true;
    if constexpr (std::is_convertible_v<std::invoke_result_t<Body>, int>) {
      return body();
    } else {
      body();
      return 0;
    }
  });
  if (code == 0 && body_ran && distributed::is_main_process()) {
    const std::vector<std::filesystem::path> files = files_written_since(common.out_dir, start);
    if (!files.empty()) fmt::print("\nfiles written:\n");
    for (const auto& file : files) {
      std::error_code error;
      fmt::print("  {}  ({})\n", file.string(), size_text(std::filesystem::file_size(file, error)));
    }
  }
  return code;
}

}  // namespace ember::examples
