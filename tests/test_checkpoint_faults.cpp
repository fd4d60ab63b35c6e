// Checkpoint writes that go wrong part-way (the disk fills, the process is killed between write
// and rename, the folder is read-only) leave the previous checkpoint intact and loadable, and
// resume_from says what it found. Each fault runs in a forked child, so that a file size limit,
// a dropped privilege or a kill touches only the save being tested.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "helpers.h"
#include "scratch_files.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::TransformerClassifierOptions tiny() {
  nn::TransformerClassifierOptions options;
  options.vocab_size = 13;
  options.max_len = 6;
  options.num_classes = 3;
  options.num_layers = 1;
  options.layer = {.d_model = 8, .num_heads = 2, .d_ff = 16, .dropout = 0.0};
  return options;
}

// A model and its optimizer; each train() step changes both, so checkpoints of different
// steps differ.
struct Run {
  nn::TransformerClassifier model{tiny()};
  nn::AdamW optimizer{model.parameters(), {.lr = 1e-2}};

  void train() {
    optimizer.zero_grad();
    nn::cross_entropy(model.forward(randint(1, 13, {4, 6})), randint(0, 3, {4})).backward();
    optimizer.step();
  }
};

// How a forked child ended, and the error message it sent back.
struct ChildOutcome {
  bool exited = false;  // by _exit; otherwise killed by `signal`
  int exit_code = -1;
  int signal = 0;
  std::string message;
};

// The exit code of a child whose body returned without throwing.
constexpr int kNoError = 0;
// ... whose body threw ember::Error (its message is sent back).
constexpr int kEmberError = 1;
// ... that could not set up the fault it was asked to cause.
constexpr int kCannotSimulate = 3;

// Runs `body` in a forked child and reports how it ended. The child sends the message of an
// ember::Error it throws (or a note from `body` through `say`) back through a pipe, and leaves
// with _exit, so nothing of this test process (doctest, static destructors) runs twice.
ChildOutcome run_in_child(const std::function<int(const std::function<void(const std::string&)>& say)>& body) {
  int channel[2];
  REQUIRE(::pipe(channel) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(channel[0]);
    ::alarm(60);  // a child that hangs fails the test instead of stalling it
    auto say = [&](const std::string& text) {
      [[maybe_unused]] const ssize_t written = ::write(channel[1], text.data(), text.size());
    };
    int code = kNoError;
    try {
      code = body(say);
    } catch (const Error& error) {
      say(error.what());
      code = kEmberError;
    } catch (...) {
      code = 2;
    }
    ::_exit(code);
  }
  ::close(channel[1]);
  ChildOutcome outcome;
  char buffer[4096];
  for (ssize_t n; (n = ::read(channel[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    outcome.message.append(buffer, static_cast<size_t>(n));
  }
  ::close(channel[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  outcome.exited = WIFEXITED(status);
  outcome.exit_code = outcome.exited ? WEXITSTATUS(status) : -1;
  outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return outcome;
}

// The files in `directory` other than `keep`.
std::vector<std::string> other_files(const ScratchDir& directory, const std::string& keep) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(directory.dir())) {
    if (entry.path().filename() != keep) names.push_back(entry.path().filename().string());
  }
  return names;
}

// The checkpoint at `path` loads into a fresh run and holds `step`.
void check_loads_at(const std::string& path, int64_t step) {
  Run fresh;
  CHECK(nn::load_checkpoint(path, fresh.model, fresh.optimizer, nullptr) == step);
}

// A checkpoint of step 1 at `path`, and the run trained one step further, ready to save step 2.
void save_step_one(Run& run, const std::string& path) {
  manual_seed(5);
  run.train();
  nn::save_checkpoint(path, run.model, run.optimizer, nullptr, 1);
  run.train();
}

}  // namespace

TEST_CASE("a save that runs out of room throws naming the file and the reason, and keeps the previous checkpoint") {
  // A full disk, simulated without privileges: the child may write files of at most half the
  // checkpoint's size (RLIMIT_FSIZE), so its write fails part-way with EFBIG, as a filling
  // disk fails with ENOSPC. SIGXFSZ is ignored so that write() returns the error instead of
  // the signal killing the process.
  ScratchDir scratch("checkpoint_faults");
  const std::string path = scratch.file("checkpoint.safetensors");
  Run run;
  save_step_one(run, path);
  const auto size = static_cast<rlim_t>(std::filesystem::file_size(path));

  const ChildOutcome outcome = run_in_child([&](const auto&) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{};
    ::getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = size / 2;
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return kCannotSimulate;
    nn::save_checkpoint(path, run.model, run.optimizer, nullptr, 2);
    return kNoError;
  });
  REQUIRE(outcome.exited);
  REQUIRE(outcome.exit_code == kEmberError);
  CHECK_MESSAGE(outcome.message.find(path) != std::string::npos, outcome.message);
  CHECK_MESSAGE(outcome.message.find("File too large") != std::string::npos, outcome.message);
  check_loads_at(path, 1);
  CHECK(std::filesystem::file_size(path) == size);
  CHECK(other_files(scratch, "checkpoint.safetensors").empty());  // the partial temporary file is gone
}

TEST_CASE("a save killed between write and rename leaves the previous checkpoint, and resume_from names the leftover") {
  ScratchDir scratch("checkpoint_faults");
  const std::string path = scratch.file("checkpoint.safetensors");
  Run run;
  save_step_one(run, path);

  // The child is killed at the worst moment: its new checkpoint complete on disk, not yet
  // renamed over the old one.
  const ChildOutcome outcome = run_in_child([&](const auto&) {
    nn::before_rename_for_tests = [](const std::string&) { ::raise(SIGKILL); };
    nn::save_checkpoint(path, run.model, run.optimizer, nullptr, 2);
    return kNoError;
  });
  REQUIRE_FALSE(outcome.exited);
  REQUIRE(outcome.signal == SIGKILL);

  check_loads_at(path, 1);
  const std::vector<std::string> leftovers = other_files(scratch, "checkpoint.safetensors");
  REQUIRE(leftovers.size() == 1);
  CHECK(leftovers.front().starts_with("checkpoint.safetensors.tmp-"));
  check_loads_at(scratch.file(leftovers.front()), 2);  // the write itself had finished

  // --resume takes the checkpoint, not the leftover, and says so.
  Run resumed;
  std::string report;
  CHECK(train::resume_from(path, resumed.model, resumed.optimizer, nullptr, &report) == 1);
  CHECK(report.starts_with("resumed from " + path + " at step 1"));
  CHECK_MESSAGE(report.find("ignored 1 unfinished temporary file of an interrupted save") != std::string::npos, report);
  CHECK_MESSAGE(report.find(leftovers.front()) != std::string::npos, report);

  // A later save goes through as usual.
  nn::save_checkpoint(path, run.model, run.optimizer, nullptr, 2);
  check_loads_at(path, 2);
}

TEST_CASE("a save into a read-only folder throws naming the file and the reason, and keeps the previous checkpoint") {
  ScratchDir scratch("checkpoint_faults");
  const std::string path = scratch.file("checkpoint.safetensors");
  Run run;
  save_step_one(run, path);
  const std::string folder = scratch.path();
  std::filesystem::permissions(folder, std::filesystem::perms::owner_write | std::filesystem::perms::group_write |
                                           std::filesystem::perms::others_write,
                               std::filesystem::perm_options::remove);

  // Root ignores permission bits, so as root the child first becomes the unprivileged user
  // "nobody" (65534): the folder is read-only to it as to anyone else.
  const ChildOutcome outcome = run_in_child([&](const auto& say) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      say("cannot drop root privileges");
      return kCannotSimulate;
    }
    if (::access(folder.c_str(), W_OK) == 0) {
      say("this process may write into a folder without write permission (a capability such as CAP_DAC_OVERRIDE)");
      return kCannotSimulate;
    }
    nn::save_checkpoint(path, run.model, run.optimizer, nullptr, 2);
    return kNoError;
  });
  std::filesystem::permissions(folder, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  REQUIRE(outcome.exited);
  if (outcome.exit_code == kCannotSimulate) {
    MESSAGE("read-only folder not simulated: " << outcome.message);
    return;
  }
  REQUIRE(outcome.exit_code == kEmberError);
  CHECK_MESSAGE(outcome.message.find(path) != std::string::npos, outcome.message);
  CHECK_MESSAGE(outcome.message.find("Permission denied") != std::string::npos, outcome.message);
  check_loads_at(path, 1);
  CHECK(other_files(scratch, "checkpoint.safetensors").empty());
}

TEST_CASE("a save whose folder is a file throws naming the file and the reason, as root too") {
  ScratchDir scratch("checkpoint_faults");
  const std::string not_a_folder = scratch.write("run", "a file where the run's folder should be");
  Run run;
  CHECK_THROWS_WITH_ALL(nn::save_checkpoint(not_a_folder + "/checkpoint.safetensors", run.model, run.optimizer,
                                            nullptr, 1),
                        "run/checkpoint.safetensors", "Not a directory");
  CHECK(other_files(scratch, "run").empty());
}

TEST_CASE("resume_from says what it found: no checkpoint, a checkpoint and its step, or a broken one and why") {
  ScratchDir scratch("checkpoint_faults");
  const std::string path = scratch.file("checkpoint.safetensors");
  Run run;
  std::string report;
  CHECK_FALSE(train::resume_from(path, run.model, run.optimizer, nullptr, &report).has_value());
  CHECK(report == "no checkpoint at " + path + ": starting from step 0");

  save_step_one(run, path);
  CHECK(train::resume_from(path, run.model, run.optimizer, nullptr, &report) == 1);
  CHECK(report == "resumed from " + path + " at step 1");

  // A checkpoint cut short (as a copy interrupted by a full disk would be) is refused, naming
  // the file and the problem, and stays as it was.
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  CHECK_THROWS_WITH_ALL(train::resume_from(path, run.model, run.optimizer, nullptr, &report), path.c_str(),
                        "cannot be resumed from", "left as it was", "not a valid safetensors file");
  CHECK(std::filesystem::file_size(path) == size / 2);
}
