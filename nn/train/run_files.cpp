// The checkpoint helpers around nn::save_checkpoint / nn::load_checkpoint.
#include "nn/train/run_files.h"

#include "core/distributed/process_group.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include <fmt/ranges.h>

#include "core/error.h"
#include "nn/io/atomic_file.h"

namespace ember::train {
namespace {

// The temporary files that saves of `path` left behind when they were stopped before their
// rename (named "<path>.tmp-<pid>-<counter>", as the atomic writers name them), sorted.
std::vector<std::string> unfinished_saves(const std::string& path) {
  const std::filesystem::path target(path);
  const std::filesystem::path directory = target.has_parent_path() ? target.parent_path() : ".";
  const std::string prefix = target.filename().string() + ".tmp-";
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (entry.path().filename().string().starts_with(prefix)) found.push_back(entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::optional<int64_t> resume_from(const std::string& path, nn::Module& model, nn::Optimizer& optimizer,
                                   nn::Scheduler* scheduler, std::string* report, nn::GradScaler* scaler) {
  std::error_code error;
  const bool found = std::filesystem::exists(path, error);
  std::optional<int64_t> step;
  if (found) {
    try {
      step = nn::load_checkpoint(path, model, optimizer, scheduler, scaler);
    } catch (const Error& load_error) {
      fail("resume_from: the checkpoint '{}' is there but cannot be resumed from, so the run stops rather than start "
           "afresh over it; the file is left as it was (move it away to start afresh). The reason: {}",
           path, load_error.what());
    }
  }
  if (report != nullptr) {
    *report = found ? fmt::format("resumed from {} at step {}", path, *step)
                    : fmt::format("no checkpoint at {}: starting from step 0", path);
    const std::vector<std::string> leftovers = unfinished_saves(path);
    if (!leftovers.empty()) {
      *report += fmt::format(" (ignored {} unfinished temporary file{} of an interrupted save, which may be deleted: {})",
                             leftovers.size(), leftovers.size() == 1 ? "" : "s", fmt::join(leftovers, ", "));
    }
  }
  return step;
}

CheckpointSaver::CheckpointSaver(std::string path, int64_t every_steps, const nn::Module& model,
                                 const nn::Optimizer& optimizer, const nn::Scheduler* scheduler,
                                 const nn::GradScaler* scaler)
    : path_(std::move(path)),
      every_steps_(every_steps),
      model_(model),
      optimizer_(optimizer),
      scheduler_(scheduler),
      scaler_(scaler) {
  EMBER_CHECK(every_steps_ > 0, "CheckpointSaver: every_steps must be positive, got {}", every_steps_);
}

bool CheckpointSaver::maybe_save(int64_t step) {
  if (step % every_steps_ != 0) return false;
  save(step);
  return true;
}

void CheckpointSaver::save(int64_t step) {
  // Under data parallelism every rank holds the same state: rank 0 alone writes it, and every
  // rank reads it back on --resume.
  if (distributed::is_main_process()) {
    nn::create_directory(std::filesystem::path(path_).parent_path().string());
    nn::save_checkpoint(path_, model_, optimizer_, scheduler_, step, scaler_);
  }
  last_saved_step_ = step;
}

}  // namespace ember::train
