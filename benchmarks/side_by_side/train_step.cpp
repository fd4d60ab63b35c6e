// ember's half of the side-by-side benchmark: builds one reference workload, runs warm-up steps,
// then times training steps one by one, and prints one JSON object on stdout for the driver
// (side_by_side.py), which runs PyTorch's twin (torch_workloads.py) the same way.
//
//   ./build/benchmarks/train_step --workload classifier --steps 10
//   ./build/benchmarks/train_step --workload encoder-decoder --profile    # per-op times
//   ./build/benchmarks/train_step --sgemm-ceiling                         # BLAS's own GFLOP/s
//   ./build/benchmarks/train_step --sgemm-ceiling --precision bf16        # the bf16 gemm's
//   ./build/benchmarks/train_step --device cuda --cuda-graphs             # the step replayed as a graph
//
// Besides the step times it reports what the issue asks to check in a warm step: the page
// faults it takes (a step that gets fresh memory from the OS faults it in, page by page), the
// threads the process runs, and the peak resident memory. On a GPU it adds the caching
// allocator's peak, and counts per warm step the cudaMalloc calls and the host's waits for
// the GPU (one is expected: the item() that reads the loss).
#include <cblas.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cpu/bf16_gemm.h"
#include "ember.h"
#include "side_by_side/workloads.h"

namespace {

using Clock = std::chrono::steady_clock;
using ember::bench::Workload;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

rusage usage() {
  rusage now{};
  getrusage(RUSAGE_SELF, &now);
  return now;
}

// The "Threads:" line of /proc/self/status: every thread of the process, OpenBLAS's included.
int thread_count() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// The product a step's matrix products run on, the ceiling they are measured against:
// cblas_sgemm, or under bf16 autocast ember's own bfloat16 gemm where the instruction set in use
// has its vector kernel (core/cpu/bf16_gemm.h): in pairs on AVX512-BF16, twice the multiply-adds
// per instruction, or widened onto float32 FMAs on AVX2 and AVX-512.
bool bf16_ceiling(ember::train::Precision precision) {
  return precision == ember::train::Precision::BFloat16 && ember::cpu::bf16_gemm_in_hardware();
}

// The best GFLOP/s that product reaches on square n x n products, over `repeats` timed calls
// after two that warm up.
template <class T>
double product_gflops(int n, int repeats) {
  const size_t count = static_cast<size_t>(n) * n;
  const std::vector<T> a(count, T(0.5f)), b(count, T(0.25f));
  std::vector<T> c(count);
  double fastest = 1e30;
  for (int i = 0; i < repeats + 2; ++i) {
    const auto start = Clock::now();
    if constexpr (std::is_same_v<T, ember::BFloat16>) {
      ember::cpu::bf16_gemm(n, n, n, 1.0f, {a.data(), n, false}, {b.data(), n, false}, 0.0f, c.data(), n);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                  c.data(), n);
    }
    if (i >= 2) fastest = std::min(fastest, seconds_since(start));
  }
  return 2.0 * n * n * n / fastest / 1e9;
}

double product_gflops(bool bf16, int n, int repeats) {
  return bf16 ? product_gflops<ember::BFloat16>(n, repeats) : product_gflops<float>(n, repeats);
}

// The ceiling ember's matmuls are measured against: the best of several square sizes.
nlohmann::json product_ceiling(bool bf16) {
  nlohmann::json sizes = nlohmann::json::array();
  double best = 0;
  for (const int n : {512, 1024, 2048}) {
    const double gflops = product_gflops(bf16, n, n <= 1024 ? 20 : 5);
    best = std::max(best, gflops);
    sizes.push_back({{"n", n}, {"gflops", gflops}});
  }
  return {{"sgemm_gflops", best}, {"sizes", sizes}, {"product", bf16 ? "ember's bf16_gemm" : "cblas_sgemm"}};
}

// A shorter ceiling (about a quarter of a second), taken right before and after each profiled
// step: this machine's speed drifts by half within minutes, so the step's matmul rate is
// compared with the product's rate at the same moment as well as with the run's best.
double product_ceiling_now(bool bf16) {
  return std::max(product_gflops(bf16, 1024, 4), product_gflops(bf16, 2048, 1));
}

}  // namespace

int main(int argc, char** argv) {
  std::string workload_name = "classifier", device_name = "cpu", precision_name = "fp32";
  ember::bench::WorkloadSizes sizes;
  int steps = 10, warmup = 3, threads = 0;
  bool profile = false, ceiling = false, allow_tf32 = false, cuda_graphs = false;
  CLI::App app{"One ember training step of a reference workload, timed"};
  app.add_option("--workload", workload_name, "classifier, encoder-decoder or gpt")->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--batch", sizes.batch, "sequences per batch")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seq-len", sizes.seq_len, "sequence length (0: the workload's)")->capture_default_str();
  app.add_option("--d-model", sizes.d_model, "model width (d_ff 4 x d_model)")->capture_default_str();
  app.add_option("--heads", sizes.heads, "attention heads")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", sizes.layers, "blocks (0: the workload's)")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--vocab", sizes.vocab, "vocabulary size (0: the workload's)")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads (0: all cores)")->capture_default_str();
  app.add_option("--device", device_name, "cpu or cuda")->capture_default_str();
  app.add_option("--precision", precision_name, "fp32, or autocast to bf16 or fp16 (fp16 with loss scaling)")
      ->capture_default_str();
  app.add_flag("--profile", profile, "also time every op over the timed steps (CPU kernels only)");
  app.add_flag("--allow-tf32", allow_tf32, "let CUDA float32 matrix products use TF32 tensor cores");
  app.add_flag("--cuda-graphs", cuda_graphs,
               "on a GPU, capture the whole step (forward, backward, AdamW) once after the warm-up and time its "
               "replays");
  app.add_flag("--sgemm-ceiling", ceiling,
               "measure the products alone and exit: cblas_sgemm, or with --precision bf16 on a CPU with AVX512-BF16 "
               "ember's bf16 gemm");
  CLI11_PARSE(app, argc, argv);

  try {
    if (threads > 0) ember::train::set_threads(threads);
    const ember::train::Precision precision = ember::train::parse_precision(precision_name);
    if (ceiling) {
      fmt::print("{}\n", product_ceiling(bf16_ceiling(precision)).dump());
      return 0;
    }
    ember::manual_seed(0);
    const ember::Device device = ember::train::parse_device(device_name);
    ember::cuda::set_allow_tf32(allow_tf32);
    std::unique_ptr<Workload> workload = ember::bench::make_workload(workload_name, sizes, device, precision);
    if (cuda_graphs && ember::train::needs_loss_scaling(precision)) {
      // The loss scaler decides on the host whether to step, which a replayed graph cannot.
      fmt::print(stderr, "--precision fp16: CUDA graphs off (the loss scaler decides on the host whether to step)\n");
      cuda_graphs = false;
    }
    int64_t parameters = 0;
    for (const ember::Tensor& p : workload->model().parameters()) parameters += p.numel();

    for (int i = 0; i < warmup; ++i) workload->step();
    // The timed step: op by op, or the warm step captured once and replayed, as a user who trains
    // on fixed shapes would (core/cuda_graph.h). The warm-up made the optimizer's state, which a
    // capture cannot make.
    std::function<double()> timed_step = [&] { return workload->step(); };
    ember::cuda::CudaGraph graph;
    ember::Tensor captured_loss;
    if (cuda_graphs && device.is_cuda()) {
      if (warmup == 0) workload->step();
      graph.capture([&] { captured_loss = workload->queue_step(); }, device.index);
      timed_step = [&] {
        graph.replay();
        return captured_loss.item<double>();
      };
    }
    const rusage before = usage();
    const ember::cuda::MemoryStats device_before = ember::cuda::memory_stats(device.index);
    const int64_t waits_before = ember::cuda::host_synchronizations();
    const int64_t cublas_before = ember::cuda::cublas_calls();
    std::vector<double> step_ms;
    std::vector<long> step_faults;  // each step's own: a one-off fault early on shows as one
    std::vector<int64_t> step_fresh_blocks;  // blocks the CPU allocator's cache could not serve
    double loss = 0;
    for (int i = 0; i < steps; ++i) {
      const long faults_before = usage().ru_minflt;
      const int64_t fresh_before = ember::cpu_allocator_stats().fresh_allocations;
      const auto start = Clock::now();
      loss = timed_step();  // item() waits for the step to finish, on any device
      step_ms.push_back(1e3 * seconds_since(start));
      step_faults.push_back(usage().ru_minflt - faults_before);
      step_fresh_blocks.push_back(ember::cpu_allocator_stats().fresh_allocations - fresh_before);
    }
    const rusage after = usage();
    const ember::cuda::MemoryStats device_after = ember::cuda::memory_stats(device.index);
    const int64_t waits_after = ember::cuda::host_synchronizations();
    const int64_t cublas_after = ember::cuda::cublas_calls();

    nlohmann::json result = {
        {"library", "ember"},
        {"workload", workload_name},
        {"device", device.str()},
        {"precision", precision_name},
        {"batch", sizes.batch},
        {"tokens_per_step", workload->tokens_per_step()},
        {"parameters", parameters},
        {"step_ms", step_ms},
        {"loss", loss},
        {"peak_rss_mb", static_cast<double>(after.ru_maxrss) / 1024.0},
        {"minor_faults_per_step", static_cast<double>(after.ru_minflt - before.ru_minflt) / steps},
        {"minor_faults_steps", step_faults},
        {"fresh_cpu_blocks_steps", step_fresh_blocks},
        {"threads", thread_count()},
        {"omp_threads", ember::train::thread_count()},
    };
    if (device.is_cuda()) {
      result["peak_device_mb"] = static_cast<double>(device_after.peak_allocated_bytes) / (1 << 20);
      result["cuda_malloc_per_step"] =
          static_cast<double>(device_after.cuda_malloc_calls - device_before.cuda_malloc_calls) / steps;
      result["host_waits_per_step"] = static_cast<double>(waits_after - waits_before) / steps;
      result["cublas_calls_per_step"] = static_cast<double>(cublas_after - cublas_before) / steps;
      result["allow_tf32"] = allow_tf32;
      result["cuda_graphs"] = graph.is_captured();
    }
    if (profile) {
      // Profiled steps are timed too: the ops' shares are of these steps' time. On the CPU each
      // step is profiled on its own, between two product ceilings, for its matmul rate against them.
      const bool paired_ceiling = !device.is_cuda();
      std::vector<double> profiled_ms;
      std::map<std::string, ember::profiler::OpTime> totals;
      nlohmann::json matmul_steps = nlohmann::json::array();
      double ceiling_before = paired_ceiling ? product_ceiling_now(bf16_ceiling(precision)) : 0;
      for (int i = 0; i < steps; ++i) {
        ember::profiler::start();
        const auto start = Clock::now();
        workload->step();
        profiled_ms.push_back(1e3 * seconds_since(start));
        // Matrix products run in matmul and inside the fused attention kernels, whose time also
        // covers their softmax, mask and dropout: the rate over both is a lower bound.
        double matmul_seconds = 0, matmul_flops = 0, product_seconds = 0, product_flops = 0;
        for (const auto& op : ember::profiler::stop()) {
          ember::profiler::OpTime& total = totals[op.name];
          total.name = op.name;
          total.calls += op.calls;
          total.seconds += op.seconds;
          total.flops += op.flops;
          if (op.name == "matmul") matmul_seconds = op.seconds, matmul_flops = op.flops;
          if (op.name == "matmul" || op.name == "attention" || op.name == "attention_backward") {
            product_seconds += op.seconds;
            product_flops += op.flops;
          }
        }
        if (paired_ceiling && matmul_seconds > 0) {
          const double ceiling_after = product_ceiling_now(bf16_ceiling(precision));
          matmul_steps.push_back({{"matmul_gflops", matmul_flops / matmul_seconds / 1e9},
                                  {"products_gflops", product_flops / product_seconds / 1e9},
                                  {"ceiling_before", ceiling_before},
                                  {"ceiling_after", ceiling_after}});
          ceiling_before = ceiling_after;
        }
      }
      std::sort(profiled_ms.begin(), profiled_ms.end());
      result["profiled_step_ms"] = profiled_ms[profiled_ms.size() / 2];
      std::vector<ember::profiler::OpTime> by_time;
      for (const auto& [name, op] : totals) by_time.push_back(op);
      std::sort(by_time.begin(), by_time.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
      nlohmann::json ops = nlohmann::json::array();
      for (const auto& op : by_time) {
        ops.push_back({{"op", op.name}, {"calls", op.calls / steps}, {"ms", 1e3 * op.seconds / steps},
                       {"gflop", op.flops / steps / 1e9}});
      }
      result["profile"] = ops;
      if (paired_ceiling) result["matmul_steps"] = matmul_steps;
    }
    fmt::print("{}\n", result.dump());
  } catch (const ember::Error& error) {
    fmt::print(stderr, "error: {}\n", error.what());
    return 1;
  }
  return 0;
}
