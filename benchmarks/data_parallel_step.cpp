// Data-parallel scaling of the transformer classifier's training step (the side-by-side
// benchmark's classifier: 4 pre-LN layers, d_model 256, vocabulary 8192). The global batch is
// fixed and split among the ranks, so the ideal is a step W times shorter on W processes.
//
//   OMP_NUM_THREADS=1 ./data_parallel_step                          # one process, no MPI
//   OMP_NUM_THREADS=1 mpirun -np 2 ./data_parallel_step             # two processes
//   mpirun -np 1 ./data_parallel_step --device cuda                 # NCCL's overhead on one GPU
//
// Rank 0 prints, per configuration, the median step time and, for DDP, the all-reduce time the
// backward pass did not hide (waited for at its end), the time spent copying gradients into
// buckets and starting their all-reduce, and the bytes each rank sends into all-reduce per step;
// then the bandwidth of a lone all-reduce of the model's gradient size.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "ember.h"

using namespace ember;

namespace {

struct Sizes {
  int64_t global_batch = 32;
  int64_t seq_len = 128;
  int64_t d_model = 256;
  int steps = 8;
  int warmup = 2;
  double bucket_mib = 25;
  Device device = kCPU;
};

std::shared_ptr<nn::TransformerClassifier> make_classifier(const Sizes& sizes) {
  nn::TransformerClassifierOptions options;
  options.vocab_size = 8192;
  options.max_len = sizes.seq_len;
  options.num_classes = 4;
  options.num_layers = 4;
  options.layer = {.d_model = sizes.d_model, .num_heads = 4, .d_ff = 4 * sizes.d_model, .dropout = 0.1,
                   .activation = nn::Activation::GELU, .norm_first = true};
  options.pooling = nn::Pooling::Cls;
  options.embedding_norm = true;
  options.final_norm = false;
  options.padding_idx = std::nullopt;
  return std::make_shared<nn::TransformerClassifier>(options);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Measured {
  double step_ms = 0, exposed_ms = 0, launch_ms = 0;
  int64_t bytes_per_step = 0;
  size_t buckets = 0;
};

// `sizes.steps` timed steps after the warm-up; with_ddp false trains this rank's share alone.
Measured measure(const Sizes& sizes, bool with_ddp, bool overlap) {
  const int world = distributed::world_size(), rank = distributed::rank();
  const int64_t per_rank = sizes.global_batch / world;
  manual_seed(1);
  auto model = make_classifier(sizes);
  model->to(sizes.device);
  std::unique_ptr<nn::DistributedDataParallel> ddp;
  if (with_ddp) {
    ddp = std::make_unique<nn::DistributedDataParallel>(
        model, nn::DistributedDataParallelOptions{.bucket_cap_bytes = static_cast<int64_t>(sizes.bucket_mib * (1 << 20)),
                                                  .overlap = overlap});
  }
  nn::AdamW optimizer(model->parameters(), {.lr = 1e-4});
  manual_seed(100 + static_cast<uint64_t>(rank));
  const Tensor ids = randint(4, 8192, {per_rank, sizes.seq_len}).to(sizes.device);
  const Tensor labels = randint(0, 4, {per_rank}).to(sizes.device);
  std::vector<double> step_seconds;
  for (int step = 0; step < sizes.warmup + sizes.steps; ++step) {
    if (step == sizes.warmup && ddp) ddp->reset_stats();
    const double start = now();
    optimizer.zero_grad();
    nn::cross_entropy(model->forward(ids), labels).backward();
    optimizer.step();
    cuda::synchronize();  // a GPU step is timed to its end (nothing to wait for on the CPU)
    if (step >= sizes.warmup) step_seconds.push_back(now() - start);
  }
  // Every rank's steps are tied together by the all-reduces; rank 0's times stand for the job.
  Measured m;
  m.step_ms = 1e3 * median(step_seconds);
  if (ddp) {
    m.exposed_ms = 1e3 * ddp->stats().exposed_seconds / sizes.steps;
    m.launch_ms = 1e3 * ddp->stats().launch_seconds / sizes.steps;
    m.bytes_per_step = ddp->stats().bytes_reduced / sizes.steps;
    m.buckets = ddp->buckets().size();
  }
  return m;
}

// Median seconds of a lone all-reduce of `numel` float32 elements.
double time_all_reduce(int64_t numel, int repeats, Device device) {
  Tensor buffer = ones({numel}, device);
  std::vector<double> seconds;
  for (int i = 0; i < repeats + 1; ++i) {
    distributed::barrier();
    const double start = now();
    distributed::all_reduce_async(buffer).wait();
    if (i > 0) seconds.push_back(now() - start);
  }
  return median(seconds);
}

int run(Sizes sizes, const std::string& device) {
  if (distributed::launched_by_mpi()) distributed::init();
  sizes.device = train::parse_device(device);
  if (sizes.device.is_cuda()) sizes.device = Device::cuda(distributed::local_rank());
  const int world = distributed::world_size();
  EMBER_CHECK(sizes.global_batch % world == 0, "data_parallel_step: --batch {} does not split among {} ranks",
              sizes.global_batch, world);
  const bool main_rank = distributed::is_main_process();
  if (main_rank) {
    fmt::print("classifier step on {}, global batch {} x {} tokens, d_model {}, {} rank(s) x {} OpenMP thread(s), "
               "bucket {} MiB, median of {} steps\n",
               sizes.device.str(), sizes.global_batch, sizes.seq_len, sizes.d_model, world, std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "?",
               sizes.bucket_mib, sizes.steps);
  }
  const Measured alone = measure(sizes, false, false);
  if (main_rank) {
    fmt::print("{:<28} step {:8.1f} ms  ({:.1f} sequences/s)\n", "no DDP (this rank's share)", alone.step_ms,
               sizes.global_batch / world * 1e3 / alone.step_ms);
  }
  if (!distributed::is_initialized()) return 0;
  for (bool overlap : {true, false}) {
    const Measured m = measure(sizes, true, overlap);
    if (main_rank) {
      fmt::print("{:<28} step {:8.1f} ms  ({:.1f} sequences/s)  exposed all-reduce {:6.1f} ms  bucket copy+start "
                 "{:5.1f} ms  {:.1f} MB/step in {} buckets\n",
                 overlap ? "DDP, overlapped" : "DDP, all-reduce after backward", m.step_ms,
                 sizes.global_batch * 1e3 / m.step_ms, m.exposed_ms, m.launch_ms, m.bytes_per_step / 1e6, m.buckets);
    }
  }
  const int64_t gradient_numel = make_classifier(sizes)->num_parameters();
  const double seconds = time_all_reduce(gradient_numel, 10, sizes.device);
  const double bytes = 4.0 * static_cast<double>(gradient_numel);
  if (main_rank) {
    // Bus bandwidth as NCCL's tests define it: each rank sends and receives 2(W-1)/W of the data.
    fmt::print("lone all-reduce of {:.1f} MB: {:.2f} ms, algorithm bandwidth {:.2f} GB/s, bus bandwidth {:.2f} GB/s\n",
               bytes / 1e6, 1e3 * seconds, bytes / seconds / 1e9, bytes / seconds / 1e9 * 2.0 * (world - 1) / world);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Sizes sizes;
  CLI::App app{"Data-parallel scaling of the classifier's training step"};
  app.add_option("--batch", sizes.global_batch, "global batch, split among the ranks");
  app.add_option("--seq-len", sizes.seq_len, "tokens per sequence");
  app.add_option("--d-model", sizes.d_model, "model width");
  app.add_option("--steps", sizes.steps, "timed steps per configuration");
  app.add_option("--warmup", sizes.warmup, "untimed steps first");
  app.add_option("--bucket-mib", sizes.bucket_mib, "DDP bucket size in MiB");
  std::string device = "cpu";
  app.add_option("--device", device, "cpu, or cuda (each rank on the GPU of its local rank)");
  CLI11_PARSE(app, argc, argv);

  try {
    return run(sizes, device);
  } catch (const std::exception& error) {
    // Under mpirun the other ranks would wait for this one: end the whole job.
    if (distributed::is_initialized() && distributed::world_size() > 1) distributed::abort(error.what());
    fmt::print(stderr, "error: {}\n", error.what());
    return 1;
  }
}
