// DistributedDataParallel under mpirun: W ranks with b rows each take the same steps, to 1e-10 in
// float64, as one process on the W*b rows; with several bucket sizes, without overlap, with no_sync
// accumulation; a parameter that one rank leaves without gradient does not stall the others; a
// checkpoint written under DDP resumes bit-identically and loads in one process.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "ember.h"

using namespace ember;

namespace {

int rank() { return distributed::rank(); }
int world() { return distributed::world_size(); }

// A small float64 network with a layer norm between two linear layers, and a head used only
// when asked (a branch not every rank takes).
class TinyNet : public nn::Module {
 public:
  TinyNet() : Module("TinyNet") {
    first = register_module("first", std::make_shared<nn::Linear>(5, 8));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(Shape{8}));
    second = register_module("second", std::make_shared<nn::Linear>(8, 3));
    side = register_module("side", std::make_shared<nn::Linear>(5, 1));
    to(kFloat64);
  }
  Tensor forward(const Tensor& x, bool use_side = false) {
    Tensor out = second->forward(tanh(norm->forward(first->forward(x))));
    if (use_side) out = add(out, side->forward(x));
    return out;
  }
  std::shared_ptr<nn::Linear> first, second, side;
  std::shared_ptr<nn::LayerNorm> norm;
};

// The data every rank can make alike: inputs [steps * rows, 5] and targets [steps * rows, 3].
struct Data {
  Tensor inputs, targets;
};
Data make_data(int64_t rows) {
  manual_seed(1234);
  return {randn({rows, 5}, kFloat64), randn({rows, 3}, kFloat64)};
}

std::shared_ptr<TinyNet> make_model() {
  manual_seed(77 + static_cast<uint64_t>(rank()));  // every rank starts differently: DDP must fix it
  return std::make_shared<TinyNet>();
}

// A model with the same weights as `source`, outside any DDP.
std::shared_ptr<TinyNet> copy_of(const TinyNet& source) {
  auto copy = std::make_shared<TinyNet>();
  copy->load_state_dict(source.state_dict());
  return copy;
}

Tensor loss_of(TinyNet& model, const Tensor& x, const Tensor& y) { return nn::mse_loss(model.forward(x), y); }

void check_same_parameters(const nn::Module& actual, const nn::Module& expected, double tolerance) {
  const auto a = actual.named_parameters();
  const auto e = expected.named_parameters();
  REQUIRE(a.size() == e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i].first);
    const std::vector<double> av = a[i].second.to_vector<double>(), ev = e[i].second.to_vector<double>();
    REQUIRE(av.size() == ev.size());
    double worst = 0;
    for (size_t k = 0; k < av.size(); ++k) worst = std::max(worst, std::abs(av[k] - ev[k]));
    CHECK(worst <= tolerance);
  }
}

// `steps` steps of DDP with per-rank batch `b`, `micro` micro-batches per step (all but the last
// under no_sync), against one process on the whole batch, with Adam.
void check_equivalence(int64_t bucket_cap_bytes, bool overlap, int steps, int64_t b, int micro) {
  const int64_t global_micro_rows = b * world();
  const Data data = make_data(steps * micro * global_micro_rows);
  auto model = make_model();
  nn::DistributedDataParallel ddp(model, {.bucket_cap_bytes = bucket_cap_bytes, .overlap = overlap});
  auto reference = copy_of(*model);  // rank 0's weights, after the broadcast
  nn::Adam optimizer(model->parameters(), {.lr = 0.05});
  nn::Adam reference_optimizer(reference->parameters(), {.lr = 0.05});

  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    reference_optimizer.zero_grad();
    for (int m = 0; m < micro; ++m) {
      const int64_t start = (int64_t{step} * micro + m) * global_micro_rows;
      // This rank's rows of the micro-batch, and the whole micro-batch for the reference.
      const Tensor x = data.inputs.narrow(0, start + rank() * b, b), y = data.targets.narrow(0, start + rank() * b, b);
      if (m + 1 < micro) {
        auto guard = ddp.no_sync();
        loss_of(*model, x, y).backward();
      } else {
        loss_of(*model, x, y).backward();
      }
      loss_of(*reference, data.inputs.narrow(0, start, global_micro_rows), data.targets.narrow(0, start, global_micro_rows))
          .backward();
    }
    optimizer.step();
    reference_optimizer.step();
  }
  check_same_parameters(*model, *reference, 1e-10);
  CHECK(ddp.stats().steps == steps);
  // With several buckets, some start while backward still runs, once the buckets follow the
  // order gradients come in (the unused side head's last).
  if (!overlap) CHECK(ddp.stats().buckets_overlapped == 0);
  if (overlap && ddp.buckets().size() > 2) CHECK(ddp.stats().buckets_overlapped > 0);
}

}  // namespace

TEST_CASE("DDP starts every rank from rank 0's weights") {
  auto model = make_model();
  nn::DistributedDataParallel ddp(model);
  Tensor weight = model->first->weight.detach().contiguous().clone();
  Tensor gathered = distributed::all_gather(weight);
  for (int r = 1; r < world(); ++r) {
    CHECK(gathered.select(0, r).to_vector<double>() == gathered.select(0, 0).to_vector<double>());
  }
}

TEST_CASE("DDP on W ranks with batch b takes the steps one process takes with batch W*b") {
  SUBCASE("one bucket for everything") { check_equivalence(25 << 20, true, 3, 4, 1); }
  SUBCASE("a bucket per parameter") { check_equivalence(1, true, 3, 4, 1); }
  SUBCASE("buckets of about 200 bytes") { check_equivalence(200, true, 3, 4, 1); }
  SUBCASE("without overlap") { check_equivalence(200, false, 3, 4, 1); }
  SUBCASE("accumulating three micro-batches with no_sync") { check_equivalence(200, true, 2, 2, 3); }
}

TEST_CASE("a parameter one rank leaves without gradient stalls nobody and gets the average") {
  auto model = make_model();
  nn::DistributedDataParallel ddp(model, {.bucket_cap_bytes = 64});
  const Data data = make_data(2);
  // Only rank 0 uses the side head: its gradient there, halved (the other ranks count as zero).
  model->forward(data.inputs, /*use_side=*/rank() == 0).sum().backward();
  const std::vector<double> side_grad = model->side->bias.grad().to_vector<double>();
  // d(sum)/d(side.bias) on rank 0 is rows * outputs = 2 * 3.
  CHECK(side_grad == std::vector<double>{6.0 / world()});
  // A second step in which nobody uses it: a zero gradient, and still no stall.
  model->zero_grad();
  model->forward(data.inputs).sum().backward();
  CHECK(model->side->bias.grad().to_vector<double>() == std::vector<double>{0.0});
}

TEST_CASE("DDP refuses a bucket cap below one byte") {
  CHECK_THROWS_WITH_AS(nn::DistributedDataParallel(make_model(), {.bucket_cap_bytes = 0}),
                       "DistributedDataParallel: bucket_cap_bytes must be at least 1, got 0", Error);
}

TEST_CASE("a checkpoint written under DDP resumes bit-identically under DDP and loads in one process") {
  const std::string path = (std::filesystem::temp_directory_path() / "ember_ddp_checkpoint.safetensors").string();
  const int64_t b = 3;
  const Data data = make_data(4 * b * world());
  auto train = [&](TinyNet& model, nn::DistributedDataParallel&, nn::Optimizer& optimizer, int from, int to) {
    for (int step = from; step < to; ++step) {
      optimizer.zero_grad();
      const int64_t start = (int64_t{step} * world() + rank()) * b;
      loss_of(model, data.inputs.narrow(0, start, b), data.targets.narrow(0, start, b)).backward();
      optimizer.step();
    }
  };
  // Four steps straight.
  auto straight = make_model();
  nn::DistributedDataParallel straight_ddp(straight);
  nn::Adam straight_optimizer(straight->parameters(), {.lr = 0.05});
  train(*straight, straight_ddp, straight_optimizer, 0, 4);

  // Two steps, a checkpoint (rank 0 writes it), then a fresh model resumed from it for two more.
  {
    auto first = make_model();
    nn::DistributedDataParallel ddp(first);
    nn::Adam optimizer(first->parameters(), {.lr = 0.05});
    train(*first, ddp, optimizer, 0, 2);
    train::CheckpointSaver saver(path, 2, *first, optimizer, nullptr);
    saver.save(2);
    distributed::barrier();  // the file is complete before anyone reads it

    // One process loads it: the same weights as every rank holds.
    auto alone = std::make_shared<TinyNet>();
    nn::Adam alone_optimizer(alone->parameters(), {.lr = 0.05});
    CHECK(nn::load_checkpoint(path, *alone, alone_optimizer, nullptr) == 2);
    check_same_parameters(*alone, *first, 0.0);
  }
  auto resumed = make_model();
  nn::Adam optimizer(resumed->parameters(), {.lr = 0.05});
  REQUIRE(train::resume_from(path, *resumed, optimizer, nullptr) == std::optional<int64_t>(2));
  nn::DistributedDataParallel ddp(resumed);
  train(*resumed, ddp, optimizer, 2, 4);
  check_same_parameters(*resumed, *straight, 0.0);
  distributed::barrier();
  if (rank() == 0) std::remove(path.c_str());
}

TEST_CASE("trainer helpers: totals over ranks, and files and progress from rank 0 alone") {
  const std::vector<double> totals = train::sum_over_ranks({1.0, double(rank())});
  CHECK(totals == std::vector<double>{double(world()), double(int64_t{world()} * (world() - 1) / 2)});

  const auto directory = std::filesystem::temp_directory_path() / "ember_ddp_helpers";
  const std::string csv = (directory / fmt::format("metrics_rank{}.csv", rank())).string();
  if (rank() == 0) std::filesystem::remove_all(directory);
  distributed::barrier();
  {
    train::MetricsLog log(csv, {"loss"}, std::nullopt);
    log.write(1, {{"loss", 0.5}});
    train::plot_metrics_csv(csv, "ranks");
    std::ostringstream bar, messages;
    train::ProgressBarOptions options;
    options.display = train::ProgressDisplay::Lines;
    options.bar_stream = &bar;
    options.message_stream = &messages;
    train::ProgressBar progress(2, options);
    progress.update(2, {{"loss", 0.5}});
    progress.print_line("done");
    progress.finish();
    CHECK(bar.str().empty() == (rank() != 0));
    CHECK(messages.str().empty() == (rank() != 0));
  }
  distributed::barrier();
  CHECK(std::filesystem::exists(csv) == (rank() == 0));
  CHECK(std::filesystem::exists(std::filesystem::path(csv).replace_extension(".svg")) == (rank() == 0));
  distributed::barrier();
  if (rank() == 0) std::filesystem::remove_all(directory);
}

TEST_CASE("DDP over a module held elsewhere, by reference") {
  TinyNet model;
  nn::DistributedDataParallel ddp(model, {.bucket_cap_bytes = 256});
  const Data data = make_data(2);
  loss_of(model, data.inputs, data.targets).backward();
  CHECK(ddp.stats().steps == 1);
  CHECK(&ddp.module() == &model);
}
