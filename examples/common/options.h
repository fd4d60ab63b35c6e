// The options every example takes (--device, --precision, --seed, --threads, --out, --data,
// --resume, --no-cuda-graphs) on
// a CLI11 app, setup_run(), which acts on them, and the checks of numeric options.
//
//   CLI::App app{"Train a text classifier on the sentiment sentences"};
//   examples::CommonOptions common{.out_dir = "out/text_classifier"};
//   examples::add_common_options(app, common);
//   int64_t steps = 1500;
//   app.add_option("--steps", steps, "training steps")->capture_default_str();
//   return examples::run_main(app, argc, argv, common, [&] {
//     const Device device = examples::setup_run(common);
//     ...
//   });
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "core/cpu/isa.h"
#include "core/device.h"
#include "core/distributed/process_group.h"
#include "core/random.h"
#include "nn/io/atomic_file.h"
#include "nn/train/device_option.h"
#include "nn/train/precision_option.h"

namespace ember::examples {

// Checks for numeric options. A refused value reads "--threads: must be >= 0, got -1" (CLI11
// puts the option's name first); CLI11's own PositiveNumber, NonNegativeNumber and Range print
// their bounds as "%f", the largest double in full. --help shows "INT:NONNEGATIVE".
//
//   app.add_option("--threads", threads, "CPU threads")->check(examples::at_least(0));
//   app.add_option("--dropout", dropout, "dropout rate")->check(examples::between(0.0, 0.9));
inline CLI::Validator number_check(const std::string& requirement, const std::string& help,
                                   std::function<bool(double)> accepts) {
  return CLI::Validator(
      [requirement, accepts](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) {
          return fmt::format("must be a number {}, got '{}'", requirement, text);
        }
        if (!accepts(value)) return fmt::format("must be {}, got {}", requirement, text);  // NaN fails every test
        return "";
      },
      help);
}
inline CLI::Validator at_least(double low) {
  return number_check(fmt::format(">= {}", low), low == 0 ? "NONNEGATIVE" : fmt::format("AT LEAST {}", low),
                      [low](double value) { return value >= low; });
}
inline CLI::Validator above(double low) {
  return number_check(fmt::format("> {}", low), low == 0 ? "POSITIVE" : fmt::format("ABOVE {}", low),
                      [low](double value) { return value > low; });
}
inline CLI::Validator between(double low, double high) {
  return number_check(fmt::format("between {} and {}", low, high), fmt::format("IN [{}, {}]", low, high),
                      [low, high](double value) { return value >= low && value <= high; });
}

struct CommonOptions {
  std::string device = "cpu";
  std::string precision = "fp32";  // fp32, bf16 or fp16 (nn/train/precision_option.h)
  uint64_t seed = 0;
  int threads = 0;  // 0: OpenMP's default
  std::string out_dir = "out";
  std::string data_dir = "data";
  bool resume = false;
  bool cuda_graphs = true;  // on a GPU, each batch shape's training step replayed as a CUDA graph

  // The parsed --precision (setup_run has checked it).
  train::Precision precision_choice() const { return train::parse_precision(precision); }

  // A file in the output directory: out_path("metrics.csv") -> "out/metrics.csv".
  std::string out_path(const std::string& name) const { return (std::filesystem::path(out_dir) / name).string(); }
  // A file in the data directory: data_path("cmudict/dict.txt") -> "data/cmudict/dict.txt".
  std::string data_path(const std::string& name) const { return (std::filesystem::path(data_dir) / name).string(); }
};

// Adds the common options to `app`, bound to `options`, whose current values are the
// defaults shown by --help (an example sets its own defaults before calling this).
inline void add_common_options(CLI::App& app, CommonOptions& options) {
  app.add_option("--device", options.device, "where to train: cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--precision", options.precision,
                 "fp32, or autocast to bf16 (GPUs: tensor cores, no loss scaling) or fp16 (with loss scaling)")
      ->capture_default_str();
  // CLI11 reads "-1" into a uint64_t as 2^64 - 1: the check refuses it first.
  app.add_option("--seed", options.seed, "random seed: the same seed gives the same run")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--threads", options.threads, "CPU threads (0: OMP_NUM_THREADS, else one per core)")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--out", options.out_dir, "directory for the model, metrics CSV and plots")->capture_default_str();
  app.add_option("--data", options.data_dir, "directory of the data sets (bash scripts/fetch_data.sh fills it)")
      ->capture_default_str();
  app.add_flag("--resume", options.resume, "continue from the checkpoint in --out, if there is one");
  app.add_flag("--cuda-graphs,!--no-cuda-graphs", options.cuda_graphs,
               "on a GPU, capture each batch shape's training step as a CUDA graph and replay it (the default)");
}

// Acts on the common options: checks the device (an unknown one, or CUDA on a machine
// without a GPU, throws ember::Error) and the precision, sets the thread count, seeds ember's random generator
// and creates the output directory. Prints one line saying so, and returns the device.
//
// Started by mpirun (`mpirun -np 2 ./text_classifier`), the example joins the data-parallel job
// first: each process is a rank, on the GPU of its local rank when the device is CUDA, and the
// other ranks' standard output goes to /dev/null, so that what the example prints comes once, from
// rank 0 (errors, on standard error, still come from whichever rank has them).
inline Device setup_run(const CommonOptions& options) {
  if (distributed::launched_by_mpi()) distributed::init();
  Device device = train::parse_device(options.device);
  const train::Precision precision = train::parse_precision(options.precision);
  if (device.is_cuda() && distributed::world_size() > 1) device = Device::cuda(distributed::local_rank());
  train::set_threads(options.threads);
  manual_seed(options.seed);  // the same on every rank: the same weights, the same dropout stream
  nn::create_directory(options.out_dir);
  if (!distributed::is_main_process()) {
    EMBER_CHECK(std::freopen("/dev/null", "w", stdout) != nullptr, "rank {}: cannot silence standard output",
                distributed::rank());
    return device;
  }
  // On the CPU, the instruction set whose kernels run (core/cpu/isa.h), e.g. "cpu (avx2)".
  const std::string device_name = device.is_cuda() ? device.str() : fmt::format("cpu ({})", cpu::describe_cpu_isa());
  fmt::print("device {}, {} thread{}, {}, seed {}, output in {}/\n", device_name, train::thread_count(),
             train::thread_count() == 1 ? "" : "s", train::precision_name(precision), options.seed, options.out_dir);
  if (distributed::world_size() > 1) {
    fmt::print("data parallel: {} ranks, each training on its share of every batch\n", distributed::world_size());
  }
  return device;
}

// Whether a training step may be captured as a CUDA graph: on a GPU unless --no-cuda-graphs, and
// not in fp16, whose GradScaler decides on the host whether to step (a graph replays without the
// host): then it says so and returns false.
inline bool cuda_graphs_apply(const CommonOptions& options, Device device) {
  if (!device.is_cuda() || !options.cuda_graphs) return false;
  if (options.precision_choice() == train::Precision::Float16) {
    fmt::print("--precision fp16: CUDA graphs off (the loss scaler decides on the host whether to step)\n");
    return false;
  }
  return true;
}

// Whether this process prints and writes the run's files: always alone, rank 0 under mpirun.
inline bool is_main_process() { return distributed::is_main_process(); }

}  // namespace ember::examples
