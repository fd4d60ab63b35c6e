// Fuzzes nn::load_checkpoint through train::resume_from, as `--resume` reaches it: a checkpoint
// file of any bytes restores (or refuses to restore) a model, its AdamW state, its schedule and
// the random generator.
#include "fuzz_input.h"
#include "nn/train/run_files.h"
#include "training_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  // Built once: a failed load may leave the run half restored, which the next load overwrites.
  static fuzzing::TrainingRun run;
  const std::string path = fuzzing::write_input(fuzzing::as_text(data, size), "checkpoint.safetensors");
  fuzzing::expect_success_or_error([&] {
    train::resume_from(path, *run.model, run.optimizer, &run.scheduler);
    // A restored run must be able to go on training.
    run.step();
  });
  return 0;
}
