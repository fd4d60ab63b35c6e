// Checkpoints: a resumed run continues bit-identically; other configurations are refused.
#include <filesystem>

#include "helpers.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::TransformerClassifierOptions tiny() {
  nn::TransformerClassifierOptions options;
  options.vocab_size = 13;
  options.max_len = 6;
  options.num_classes = 3;
  options.num_layers = 2;
  options.layer = {.d_model = 8, .num_heads = 2, .d_ff = 16, .dropout = 0.2, .norm_first = true};
  return options;
}

// Everything a run owns. Dropout and the random batches draw from the global generator, so
// resuming must restore it too.
struct Run {
  nn::TransformerClassifier model{tiny()};
  nn::AdamW optimizer{model.parameters(), {.lr = 1e-2}};
  nn::Scheduler scheduler{optimizer, std::make_shared<nn::WarmupCosine>(1e-2, 2, 10, 1e-4)};

  void train(int steps) {
    for (int i = 0; i < steps; ++i) {
      const Tensor ids = randint(1, 13, {4, 6});
      const Tensor labels = randint(0, 3, {4});
      optimizer.zero_grad();
      nn::cross_entropy(model.forward(ids), labels).backward();
      optimizer.step();
      scheduler.step();
    }
  }
};

std::string scratch_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("ember_test_") + name)).string();
}

}  // namespace

TEST_CASE("a run resumed from a checkpoint continues bit-identically") {
  manual_seed(42);
  Run uninterrupted;
  uninterrupted.train(6);

  manual_seed(42);
  const std::string path = scratch_path("checkpoint.safetensors");
  {
    Run first_half;
    first_half.train(3);
    nn::save_checkpoint(path, first_half.model, first_half.optimizer, &first_half.scheduler, 3);
  }
  manual_seed(999);  // a different process, a different initialisation: all overwritten by the load
  Run resumed;
  CHECK(nn::load_checkpoint(path, resumed.model, resumed.optimizer, &resumed.scheduler) == 3);
  resumed.train(3);

  const auto expected = uninterrupted.model.named_parameters();
  const auto actual = resumed.model.named_parameters();
  REQUIRE(expected.size() == actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(expected[i].first);
    CHECK(actual[i].second.to_vector<float>() == expected[i].second.to_vector<float>());
  }
  std::filesystem::remove(path);
}

TEST_CASE("a checkpoint of another configuration is refused, naming the file and the keys") {
  manual_seed(1);
  const std::string path = scratch_path("other.safetensors");
  Run run;
  nn::save_checkpoint(path, run.model, run.optimizer, nullptr, 0);

  nn::TransformerClassifierOptions wider = tiny();
  wider.layer.d_ff = 32;
  nn::TransformerClassifier other(wider);
  nn::AdamW other_optimizer(other.parameters());
  CHECK_THROWS_WITH_ALL(nn::load_checkpoint(path, other, other_optimizer, nullptr), path.c_str(),
                        "feed_forward.linear1.bias", "[16]", "[32]");
  CHECK_THROWS_WITH_ALL(nn::load_checkpoint(path, run.model, run.optimizer, &run.scheduler), path.c_str(),
                        "learning-rate schedule");
  std::filesystem::remove(path);
}

TEST_CASE("a corrupt or foreign file is refused with a clear message") {
  const std::string path = scratch_path("foreign.safetensors");
  Run run;
  nn::save_safetensors(path, run.model.state_dict());  // weights only: no checkpoint format tag
  CHECK_THROWS_WITH_ALL(nn::load_checkpoint(path, run.model, run.optimizer, nullptr), "not an ember checkpoint");
  std::filesystem::resize_file(path, 20);
  CHECK_THROWS_WITH_ALL(nn::load_checkpoint(path, run.model, run.optimizer, nullptr), path.c_str());
  std::filesystem::remove(path);
  CHECK_THROWS_WITH_ALL(nn::load_checkpoint(path, run.model, run.optimizer, nullptr), path.c_str());
}
