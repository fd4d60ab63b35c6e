// The examples' command line (examples/common/): the common options, run_main turning every
// failure into "error: ..." and an exit code, and the names of the files a run writes.
#include "helpers.h"

#if __has_include(<CLI/CLI.hpp>)

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "../examples/common/file_names.h"
#include "../examples/common/options.h"
#include "../examples/common/run_main.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Captures what is written to std::cerr while alive.
struct CapturedErrors {
  std::ostringstream text;
  std::streambuf* previous = std::cerr.rdbuf(text.rdbuf());
  ~CapturedErrors() { std::cerr.rdbuf(previous); }
};

// argv for a command line given as words (argv[0] is the program's name).
struct Arguments {
  std::vector<std::string> words;
  std::vector<char*> pointers;
  explicit Arguments(std::vector<std::string> given) : words(std::move(given)) {
    words.insert(words.begin(), "example");
    for (std::string& word : words) pointers.push_back(word.data());
  }
  int argc() { return static_cast<int>(pointers.size()); }
  char** argv() { return pointers.data(); }
};

// Runs `body` under run_main with the common options and the given command line.
template <class Body>
int run(std::vector<std::string> words, examples::CommonOptions& common, Body&& body) {
  CLI::App app{"an example"};
  examples::add_common_options(app, common);
  Arguments arguments(std::move(words));
  return examples::run_main(app, arguments.argc(), arguments.argv(), common, std::forward<Body>(body));
}

}  // namespace

TEST_CASE("the common options parse into CommonOptions") {
  examples::CommonOptions common;
  bool ran = false;
  const int code = run({"--device", "cpu", "--seed", "7", "--threads", "1", "--out", "runs/a", "--data", "d", "--resume"},
                       common, [&] { ran = true; });
  CHECK(code == 0);
  CHECK(ran);
  CHECK(common.device == "cpu");
  CHECK(common.seed == 7);
  CHECK(common.threads == 1);
  CHECK(common.out_dir == "runs/a");
  CHECK(common.out_path("metrics.csv") == "runs/a/metrics.csv");
  CHECK(common.data_path("cmudict/dict.txt") == "d/cmudict/dict.txt");
  CHECK(common.resume);
}

TEST_CASE("an unknown device is an error message and exit code 1, not a crash") {
  examples::CommonOptions common;
  CapturedErrors errors;
  const int code = run({"--device", "gpu"}, common, [&] { examples::setup_run(common); });
  CHECK(code == 1);
  CHECK(errors.text.str() == "error: --device: unknown device 'gpu' (expected cpu, cuda or cuda:N)\n");
}

TEST_CASE("--precision is fp32 unless asked; bf16 and fp16 are accepted, anything else named in an error") {
  {
    examples::CommonOptions common;
    CHECK(run({}, common, [] {}) == 0);
    CHECK(common.precision_choice() == train::Precision::Float32);
  }
  for (const auto& [name, precision] : {std::pair{"bf16", train::Precision::BFloat16},
                                        std::pair{"fp16", train::Precision::Float16}}) {
    examples::CommonOptions common;
    CHECK(run({"--precision", name}, common, [] {}) == 0);
    CHECK(common.precision_choice() == precision);
    CHECK(train::precision_name(precision) == name);
  }
  examples::CommonOptions common;
  CapturedErrors errors;
  const int code = run({"--precision", "fp64"}, common, [&] { examples::setup_run(common); });
  CHECK(code == 1);
  CHECK(errors.text.str() == "error: --precision: unknown precision 'fp64' (expected fp32, bf16 or fp16)\n");
}

TEST_CASE("fp16 turns CUDA graphs off, bf16 and fp32 keep them; the CPU never has them") {
  examples::CommonOptions common;
  CHECK_FALSE(examples::cuda_graphs_apply(common, kCPU));
  CHECK(examples::cuda_graphs_apply(common, Device::cuda()));
  common.precision = "bf16";
  CHECK(examples::cuda_graphs_apply(common, Device::cuda()));
  common.precision = "fp16";
  CHECK_FALSE(examples::cuda_graphs_apply(common, Device::cuda()));
  common.precision = "bf16";
  common.cuda_graphs = false;
  CHECK_FALSE(examples::cuda_graphs_apply(common, Device::cuda()));
}

TEST_CASE("a command-line error prints CLI11's message after 'error:' and returns CLI11's code") {
  examples::CommonOptions common;
  CapturedErrors errors;
  bool ran = false;
  const int code = run({"--seed", "abc"}, common, [&] { ran = true; });
  CHECK(code != 0);
  CHECK_FALSE(ran);
  CHECK(errors.text.str().starts_with("error: "));
  CHECK(errors.text.str().find("--seed") != std::string::npos);

  CapturedErrors more;
  CHECK(run({"--threads", "-1"}, common, [&] { ran = true; }) != 0);
  CHECK(run({"--no-such-option"}, common, [&] { ran = true; }) != 0);
  CHECK_FALSE(ran);
}

// What run_main writes to stderr for a command line refused by the common options and add_options.
template <class AddOptions>
std::string error_message(std::vector<std::string> words, AddOptions&& add_options) {
  examples::CommonOptions common;
  CLI::App app{"an example"};
  examples::add_common_options(app, common);
  add_options(app);
  Arguments arguments(std::move(words));
  CapturedErrors errors;
  const int code = examples::run_main(app, arguments.argc(), arguments.argv(), common, [] {});
  CHECK(code != 0);
  return errors.text.str();
}

TEST_CASE("an out-of-range number names the option, the bound and the value given") {
  int64_t steps = 1, batch = 1, warmup = 0;
  double dropout = 0.1, lr = 1e-3;
  const auto add_options = [&](CLI::App& app) {
    app.add_option("--steps", steps)->check(examples::at_least(0));
    app.add_option("--batch", batch)->check(examples::above(0));
    app.add_option("--lr", lr)->check(examples::above(0));
    app.add_option("--dropout", dropout)->check(examples::between(0.0, 0.9));
    app.add_option("--warmup", warmup)->check(examples::between(int64_t{0}, int64_t{1} << 30));
  };
  const std::string hint = "\nRun with --help for more information.\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--threads", "-1"}, "error: --threads: must be >= 0, got -1"},
      {{"--seed", "-1"}, "error: --seed: must be >= 0, got -1"},
      {{"--steps", "-3"}, "error: --steps: must be >= 0, got -3"},
      {{"--batch", "0"}, "error: --batch: must be > 0, got 0"},
      {{"--lr", "-0.5"}, "error: --lr: must be > 0, got -0.5"},
      {{"--dropout", "1.5"}, "error: --dropout: must be between 0 and 0.9, got 1.5"},
      {{"--warmup", "2000000000"}, "error: --warmup: must be between 0 and 1073741824, got 2000000000"},
      {{"--lr", "nan"}, "error: --lr: must be > 0, got nan"},
      {{"--batch", "many"}, "error: --batch: must be a number > 0, got 'many'"},
  };
  for (const auto& [words, expected] : cases) {
    CAPTURE(words[0]);
    const std::string message = error_message(words, add_options);
    CHECK(message == expected + hint);
    CHECK(message.find("179769") == std::string::npos);  // CLI11's own messages print the double max
  }
}

TEST_CASE("numbers within their bounds are accepted, and --help shows the bounds") {
  int64_t steps = 1;
  double dropout = 0.1;
  examples::CommonOptions common;
  CLI::App app{"an example"};
  examples::add_common_options(app, common);
  app.add_option("--steps", steps)->check(examples::above(0));
  app.add_option("--dropout", dropout)->check(examples::between(0.0, 0.9));
  Arguments arguments({"--threads", "0", "--steps", "1", "--dropout", "0.9"});
  CHECK(examples::run_main(app, arguments.argc(), arguments.argv(), common, [] {}) == 0);
  CHECK(common.threads == 0);
  CHECK(steps == 1);
  CHECK(dropout == 0.9);
  const std::string help = app.help();
  CHECK(help.find("--threads INT:NONNEGATIVE=0") != std::string::npos);
  CHECK(help.find("--steps INT:POSITIVE") != std::string::npos);
  CHECK(help.find("--dropout FLOAT:IN [0, 0.9]") != std::string::npos);
  CHECK(help.find("179769") == std::string::npos);
}

TEST_CASE("the examples check their numbers with the readable checks only") {
  // CLI11's PositiveNumber, NonNegativeNumber and Range refuse a value with "Value -1 not in
  // range 0.000000 to 1797693134862315708...": every example uses examples::at_least, above
  // or between instead.
  const std::filesystem::path examples_dir = std::filesystem::path(EMBER_SOURCE_DIR) / "examples";
  REQUIRE(std::filesystem::is_directory(examples_dir / "common"));
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(examples_dir)) {
    const std::string extension = entry.path().extension().string();
    if (extension != ".cpp" && extension != ".h") continue;
    ++files;
    std::ifstream file(entry.path());
    const std::string source((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    for (const char* check : {"CLI::PositiveNumber", "CLI::NonNegativeNumber", "CLI::Range(", "atoi("}) {
      CAPTURE(entry.path().string());
      CHECK_MESSAGE(source.find(check) == std::string::npos, std::string(check));
    }
  }
  CHECK(files > 5);
}

TEST_CASE("--help prints the options and exits 0 without running the body") {
  examples::CommonOptions common;
  bool ran = false;
  std::ostringstream help;
  std::streambuf* previous = std::cout.rdbuf(help.rdbuf());
  const int code = run({"--help"}, common, [&] { ran = true; });
  std::cout.rdbuf(previous);
  CHECK(code == 0);
  CHECK_FALSE(ran);
  for (const char* option : {"--device", "--seed", "--threads", "--out", "--data", "--resume"}) {
    CHECK(help.str().find(option) != std::string::npos);
  }
}

TEST_CASE("exceptions from the body become 'error: <message>' and exit code 1") {
  examples::CommonOptions common;
  CapturedErrors errors;
  CHECK(run({}, common, [] { fail("reader: data/x.txt line 3: bad record"); }) == 1);
  CHECK(run({}, common, [] { throw std::runtime_error("plain failure"); }) == 1);
  CHECK(run({}, common, [] { throw 42; }) == 1);
  CHECK(errors.text.str() ==
        "error: reader: data/x.txt line 3: bad record\nerror: plain failure\nerror: unknown exception\n");
  CHECK(run({}, common, [] { return 3; }) == 3);  // a body may choose its exit code
}

TEST_CASE("setup_run creates the output directory, and the files written since are found") {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("ember_test_example_out_" + std::to_string(::getpid()));
  std::filesystem::remove_all(out);
  examples::CommonOptions common;
  common.out_dir = out.string();
  const auto start = std::filesystem::file_time_type::clock::now() - std::chrono::seconds(1);
  const int code = run({"--seed", "5"}, common, [&] {
    CHECK(examples::setup_run(common) == kCPU);
    std::ofstream(common.out_path("model.safetensors")) << "weights";
    std::filesystem::create_directories(out / "plots");
    std::ofstream(common.out_path("plots/attention.svg")) << "<svg/>";
  });
  CHECK(code == 0);
  CHECK(std::filesystem::is_directory(out));
  const std::vector<std::filesystem::path> files = examples::files_written_since(common.out_dir, start);
  CHECK(files == std::vector<std::filesystem::path>{out / "model.safetensors", out / "plots/attention.svg"});
  CHECK(examples::size_text(812) == "812 B");
  CHECK(examples::size_text(2345) == "2.3 kB");
  std::filesystem::remove_all(out);
}

TEST_CASE("slug: a sentence as a short, file-system-safe name") {
  CHECK(examples::slug("What a great little phone, I love it!") == "what-a-great-little-phone-i-love-it");
  CHECK(examples::slug("  --Not   good...  ") == "not-good");
  CHECK(examples::slug("../../etc/passwd") == "etc-passwd");     // no separators, no dots
  CHECK(examples::slug("Caf\xc3\xa9 au lait") == "caf-au-lait");  // bytes outside ASCII separate words
  CHECK(examples::slug("\xf0\x9f\x98\x80 !!") == "sentence");    // nothing left
  CHECK(examples::slug("") == "sentence");
  // Long sentences are cut at a word's end, or within a word too long for that.
  CHECK(examples::slug("the quick brown fox jumps over the lazy dog and runs far away") ==
        "the-quick-brown-fox-jumps-over-the-lazy");
  CHECK(examples::slug(std::string(100, 'a')) == std::string(40, 'a'));
  CHECK(examples::slug("a few words", 6) == "a-few");
}

TEST_CASE("unused_path: an existing file is kept, the new one takes the next index") {
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("ember_test_unused_path_" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  const std::string stem = "attention-" + examples::slug("What a phone!");
  const std::filesystem::path first = examples::unused_path(directory, stem, ".svg");
  CHECK(first == directory / "attention-what-a-phone.svg");
  std::ofstream(first) << "<svg/>";
  const std::filesystem::path second = examples::unused_path(directory, stem, ".svg");
  CHECK(second == directory / "attention-what-a-phone-2.svg");
  std::ofstream(second) << "<svg/>";
  CHECK(examples::unused_path(directory, stem, ".svg") == directory / "attention-what-a-phone-3.svg");
  CHECK(examples::unused_path(directory, "attention-" + examples::slug("Not good."), ".svg") ==
        directory / "attention-not-good.svg");
  std::filesystem::remove_all(directory);
}

#else

TEST_CASE("the examples' command line (skipped: CLI11 is not installed)") { MESSAGE("CLI11 not found; skipped"); }

#endif
