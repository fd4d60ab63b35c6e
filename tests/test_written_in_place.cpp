// Every way ember writes into a tensor it was given marks the write (core/ops/inplace.h's
// mark_written_in_place), so a backward that saved the tensor before the write refuses it, as
// PyTorch does, instead of computing gradients from the new values.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/optimizer_steps.h"
#include "helpers.h"

using namespace ember;

namespace {

constexpr const char* kRefusal = "was modified by an in-place operation after it was saved";

// A weight w of `dtype` (made non-contiguous when asked) and y = sum(w * x), which saves w for
// x's gradient. `write` changes w (under no grad, as optimizers do); y.backward() must then refuse.
void check_refused_after(const std::string& what, DType dtype, bool contiguous,
                         const std::function<void(Tensor& w)>& write) {
  INFO(what << " on a " << (contiguous ? "contiguous" : "transposed") << " " << dtype_name(dtype) << " weight");
  manual_seed(0);
  Tensor w = contiguous ? randn({4, 6}).to(dtype) : randn({6, 4}).to(dtype).t();
  w = w.detach().requires_grad_(true);
  const Tensor x = randn({4, 6}).to(dtype).requires_grad_(true);
  const Tensor y = sum(mul(w, x));
  const uint64_t before = w.version();
  w.mutable_grad() = ones_like(w);
  write(w);
  CHECK(w.version() > before);
  CHECK_THROWS_WITH_ALL(y.backward(), kRefusal);
}

}  // namespace

TEST_CASE("every optimizer step marks the parameters it writes") {
  const std::vector<std::pair<std::string, std::function<void(Tensor&)>>> steps = {
      {"Adam", [](Tensor& w) { nn::Adam({w}).step(); }},
      {"Adam with weight decay", [](Tensor& w) { nn::Adam({w}, {.weight_decay = 0.1}).step(); }},
      {"AdamW", [](Tensor& w) { nn::AdamW({w}).step(); }},
      {"SGD", [](Tensor& w) { nn::SGD({w}, {.lr = 0.1}).step(); }},
      {"SGD with momentum, two steps",
       [](Tensor& w) {
         nn::SGD sgd({w}, {.lr = 0.1, .momentum = 0.9});
         sgd.step();
         sgd.step();
       }},
      {"SGD, nesterov", [](Tensor& w) { nn::SGD({w}, {.lr = 0.1, .momentum = 0.9, .nesterov = true}).step(); }},
  };
  for (const auto& [name, step] : steps) {
    for (const DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
      for (const bool contiguous : {true, false}) check_refused_after(name, dtype, contiguous, step);
    }
  }
}

TEST_CASE("GradScaler's unscale and step mark what they write") {
  for (const bool contiguous : {true, false}) {
    check_refused_after("GradScaler::step(Adam)", kFloat32, contiguous, [](Tensor& w) {
      nn::Adam adam({w});
      nn::GradScaler scaler;
      scaler.step(adam);
      scaler.update();
    });
  }
  // unscale_ alone writes only the gradient: a graph that saved the gradient (under
  // create_graph) refuses it afterwards.
  Tensor w = randn({3}).requires_grad_(true);
  nn::SGD sgd({w});
  sum(mul(w, w)).backward({.create_graph = true});
  const Tensor gradient_use = sum(mul(w.grad(), w.grad()));
  const uint64_t before = w.grad().version();
  nn::GradScaler scaler;
  scaler.unscale_(sgd);
  CHECK(w.grad().version() > before);
  CHECK_THROWS_WITH_ALL(gradient_use.backward(), kRefusal);
  // A create_graph gradient of a leaf holds a graph that holds the leaf: clearing it frees both.
  w.mutable_grad() = Tensor();
}

TEST_CASE("the fused steps mark the optimizer state they write") {
  const Tensor param = randn({5}), grad = randn({5});
  const Tensor exp_avg = zeros({5}), exp_avg_sq = zeros({5}), step = zeros({}, kFloat64);
  const Tensor lr = scalar_tensor(0.1, kFloat64);
  std::vector<Tensor> written{param, exp_avg, exp_avg_sq, step};
  std::vector<uint64_t> before;
  for (const Tensor& t : written) before.push_back(t.version());
  adam_step({&param, 1}, {&grad, 1}, {&exp_avg, 1}, {&exp_avg_sq, 1}, {&step, 1}, lr,
            AdamStepOptions{0.9, 0.999, 1e-8, 0.0, false});
  for (size_t i = 0; i < written.size(); ++i) CHECK(written[i].version() > before[i]);

  std::vector<Tensor> buffers{randn({5})};
  const uint64_t buffer_before = buffers[0].version(), param_before = param.version();
  sgd_step({&param, 1}, {&grad, 1}, buffers, lr, SGDStepOptions{0.9, 0.0, 0.0, false});
  CHECK(buffers[0].version() > buffer_before);
  CHECK(param.version() > param_before);
}

TEST_CASE("the in-place ops and the initialisers mark their writes") {
  const std::vector<std::pair<std::string, std::function<void(Tensor&)>>> writes = {
      {"add_", [](Tensor& w) { w.add_(ones_like(w)); }},
      {"add_ scalar", [](Tensor& w) { w.add_(1.0); }},
      {"mul_", [](Tensor& w) { w.mul_(2.0); }},
      {"fill_", [](Tensor& w) { w.fill_(3.0); }},
      {"zero_", [](Tensor& w) { w.zero_(); }},
      {"copy_", [](Tensor& w) { w.copy_(ones_like(w)); }},
      {"init::normal_", [](Tensor& w) { nn::init::normal_(w, 0.0, 1.0); }},
      {"init::uniform_", [](Tensor& w) { nn::init::uniform_(w, -1.0, 1.0); }},
  };
  for (const auto& [name, write] : writes) {
    check_refused_after(name, kFloat32, true, [&](Tensor& w) {
      NoGradGuard no_grad;
      write(w);
    });
  }
}

// The version counter has one writer: every in-place path reaches it through
// mark_written_in_place, so a new kernel cannot forget it by bumping it its own way.
TEST_CASE("only mark_written_in_place bumps a version counter") {
  namespace fs = std::filesystem;
  const fs::path root = EMBER_SOURCE_DIR;
  std::vector<std::string> callers;
  for (const char* folder : {"core", "cuda", "nn"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find("bump_version()") != std::string::npos) {
        callers.push_back(fs::relative(entry.path(), root).generic_string());
      }
    }
  }
  std::sort(callers.begin(), callers.end());
  CHECK(callers == std::vector<std::string>{"core/ops/inplace.cpp", "core/storage.h"});
}
