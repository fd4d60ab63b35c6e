// Run files: atomic writes leave no temporary behind; --resume finds a checkpoint or says
// there is none; the periodic saver saves on its steps.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "scratch_files.h"
#include "nn/io/atomic_file.h"
#include "nn/train/run_files.h"

using namespace ember;
using namespace ember::testing;

namespace {


std::vector<std::string> names_in(const std::filesystem::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// A model and optimizer small enough to save in a blink.
struct TinyRun {
  nn::Linear model{3, 2};
  nn::SGD optimizer{model.parameters(), {.lr = 0.1, .momentum = 0.9}};

  void step() {
    optimizer.zero_grad();
    sum(model.forward(ones({4, 3}))).backward();
    optimizer.step();
  }
};

}  // namespace

TEST_CASE("write_file_atomically writes, replaces, creates the directory and leaves no temporary file") {
  ScratchDir scratch("atomic_write");
  const std::string path = scratch.file("out/run/notes.txt");
  nn::write_file_atomically(path, "first");
  CHECK(read_text_file(path) == "first");
  nn::write_file_atomically(path, std::string("second\0binary", 13));
  CHECK(read_text_file(path) == std::string("second\0binary", 13));
  CHECK(names_in(scratch.dir() / "out/run") == std::vector<std::string>{"notes.txt"});
}

TEST_CASE("a failed atomic write throws naming the path and leaves no temporary file") {
  ScratchDir scratch("atomic_fail");
  std::filesystem::create_directories(scratch.dir() / "taken");
  // A directory where the file should go: the rename fails after the temporary was written.
  CHECK_THROWS_WITH_ALL(nn::write_file_atomically(scratch.file("taken"), "x"), "write_file_atomically",
                        "taken");
  CHECK(names_in(scratch.dir()) == std::vector<std::string>{"taken"});
  CHECK(names_in(scratch.dir() / "taken").empty());
}

TEST_CASE("create_directory makes nested directories and refuses a file in the way") {
  ScratchDir scratch("create_directory");
  nn::create_directory(scratch.file("a/b/c"));
  CHECK(std::filesystem::is_directory(scratch.dir() / "a/b/c"));
  nn::create_directory(scratch.file("a/b/c"));  // already there: fine
  nn::write_file_atomically(scratch.file("file"), "x");
  CHECK_THROWS_WITH_ALL(nn::create_directory(scratch.file("file")), "create_directory", "file");
}

TEST_CASE("resume_from says there is nothing to resume, or restores the saved run and its step") {
  ScratchDir scratch("resume_from");
  const std::string path = scratch.file("checkpoint.safetensors");
  manual_seed(3);
  TinyRun saved;
  CHECK_FALSE(train::resume_from(path, saved.model, saved.optimizer, nullptr).has_value());

  train::CheckpointSaver saver(path, 2, saved.model, saved.optimizer, nullptr);
  CHECK_FALSE(saver.last_saved_step().has_value());
  saved.step();
  CHECK_FALSE(saver.maybe_save(1));
  CHECK_FALSE(std::filesystem::exists(path));
  saved.step();
  CHECK(saver.maybe_save(2));
  CHECK(saver.last_saved_step() == 2);
  CHECK(names_in(scratch.dir()) == std::vector<std::string>{"checkpoint.safetensors"});

  manual_seed(4);
  TinyRun resumed;
  const std::optional<int64_t> step = train::resume_from(saver.path(), resumed.model, resumed.optimizer, nullptr);
  REQUIRE(step.has_value());
  CHECK(*step == 2);
  CHECK(resumed.model.weight.to_vector<float>() == saved.model.weight.to_vector<float>());

  saver.save(3);  // whatever the step
  CHECK(saver.last_saved_step() == 3);
}

TEST_CASE("resume_from refuses a file that is not a checkpoint, naming it") {
  ScratchDir scratch("resume_corrupt");
  const std::string path = scratch.file("checkpoint.safetensors");
  nn::write_file_atomically(path, "not a checkpoint");
  TinyRun run;
  CHECK_THROWS_WITH_ALL(train::resume_from(path, run.model, run.optimizer, nullptr), "checkpoint.safetensors");
}

TEST_CASE("a checkpoint saver needs a positive interval") {
  TinyRun run;
  CHECK_THROWS_WITH_ALL(train::CheckpointSaver("x", 0, run.model, run.optimizer, nullptr), "CheckpointSaver",
                        "every_steps");
}
