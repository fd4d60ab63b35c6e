// The checkpoint a training run leaves behind, and `--resume`, which continues from it. (Its other
// files are written by nn::write_file_atomically, nn/io/atomic_file.h.)
//
//   train::CheckpointSaver saver(out_dir + "/checkpoint.safetensors", 500, model, optimizer, &scheduler);
//   int64_t step = 0;
//   if (resume) {
//     std::string found;
//     if (auto resumed = train::resume_from(saver.path(), model, optimizer, &scheduler, &found)) step = *resumed;
//     fmt::print("{}\n", found);  // "resumed from out/checkpoint.safetensors at step 500"
//   }
//   for (++step; step <= total; ++step) { ...; saver.maybe_save(step); }
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nn/train/checkpoint.h"

namespace ember::train {

// For `--resume`: when a checkpoint exists at `path`, restores model, optimizer, scheduler
// (may be null) and the random generator from it and returns the step it was saved at;
// returns std::nullopt when there is no file at `path` (nothing to resume: start at step 0).
// A file that is there but does not load (truncated, corrupt, another configuration) throws
// ember::Error naming the file and why, and saying that it was left untouched: a run never
// starts afresh over a checkpoint it could not read.
// `report`, when given, receives one line for the run's log saying what was found: the
// checkpoint and its step, or that there was none; either way it names the temporary files of
// an interrupted save lying beside `path` (they are never loaded, and may be deleted).
// `scaler`, when given, takes the loss scale saved with the checkpoint (nn::load_checkpoint).
std::optional<int64_t> resume_from(const std::string& path, nn::Module& model, nn::Optimizer& optimizer,
                                   nn::Scheduler* scheduler, std::string* report = nullptr,
                                   nn::GradScaler* scaler = nullptr);

// Saves a checkpoint every `every_steps` steps (nn::save_checkpoint, itself atomic), so a run
// that is stopped loses at most that many steps. Under data parallelism only rank 0 writes (the
// ranks' states are the same); every rank resumes from the file, so it must be where all of them
// can read it (one machine, or a shared file system).
class CheckpointSaver {
 public:
  // `scheduler` and `scaler` may be null. every_steps must be positive.
  CheckpointSaver(std::string path, int64_t every_steps, const nn::Module& model, const nn::Optimizer& optimizer,
                  const nn::Scheduler* scheduler, const nn::GradScaler* scaler = nullptr);

  // Saves when `step` is a multiple of every_steps; returns whether it saved.
  bool maybe_save(int64_t step);
  // Saves now, whatever the step (at the end of training, or before an early stop).
  void save(int64_t step);

  const std::string& path() const { return path_; }
  // The step of the last save by this saver, if any.
  std::optional<int64_t> last_saved_step() const { return last_saved_step_; }

 private:
  std::string path_;
  int64_t every_steps_;
  const nn::Module& model_;
  const nn::Optimizer& optimizer_;
  const nn::Scheduler* scheduler_;
  const nn::GradScaler* scaler_;
  std::optional<int64_t> last_saved_step_;
};

}  // namespace ember::train
