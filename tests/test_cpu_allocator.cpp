// The CPU allocator keeps large freed blocks for reuse, so a warm training step takes no fresh
// memory from the OS.
#include "helpers.h"

using namespace ember;

TEST_CASE("a freed large block is handed out again for a tensor of its size class") {
  const void* first = nullptr;
  {
    const Tensor big = empty({1024, 1024});  // 4 MiB
    first = big.data_ptr<float>();
  }
  const void* second = nullptr;
  {
    const Tensor again = empty({1024, 1024});
    CHECK(again.data_ptr<float>() == first);
    // While `again` holds the block, another tensor gets a different one.
    const Tensor other = empty({1024, 1024});
    second = other.data_ptr<float>();
    CHECK(second != first);
  }
  // A slightly smaller tensor is in the same size class (classes are an eighth of a power of
  // two apart), so it reuses a cached block.
  const Tensor smaller = empty({1024, 1000});
  const void* reused = smaller.data_ptr<float>();
  CHECK((reused == first || reused == second));
}

TEST_CASE("blocks from the cache are aligned and fully usable") {
  for (int round = 0; round < 3; ++round) {
    Tensor t = empty({3, 1000, 1000});
    CHECK(reinterpret_cast<uintptr_t>(t.data_ptr<float>()) % 64 == 0);
    t.fill_(static_cast<double>(round));
    CHECK(t.sum().item<double>() == doctest::Approx(3e6 * round));
  }
}

TEST_CASE("cpu_allocator_stats counts the blocks the cache could not serve") {
  const CpuAllocatorStats before = cpu_allocator_stats();
  {
    const Tensor first = empty({5, 1024, 1024});  // 20 MiB: a size class no earlier case used
    const Tensor second = empty({5, 1024, 1024});
  }
  const CpuAllocatorStats after_first = cpu_allocator_stats();
  CHECK(after_first.fresh_allocations == before.fresh_allocations + 2);
  CHECK(after_first.cached_bytes >= before.cached_bytes + 2 * 20 * (1 << 20));
  {
    // Both blocks come back from the cache: no fresh allocation, two reuses.
    const Tensor again = empty({5, 1024, 1024});
    const Tensor and_again = empty({5, 1024, 1000});
    const CpuAllocatorStats during = cpu_allocator_stats();
    CHECK(during.fresh_allocations == after_first.fresh_allocations);
    CHECK(during.cached_reuses == after_first.cached_reuses + 2);
    CHECK(during.cached_bytes == after_first.cached_bytes - 2 * 20 * (1 << 20));
  }
  // Small tensors are malloc's: the statistics do not move.
  const CpuAllocatorStats before_small = cpu_allocator_stats();
  { const Tensor small = empty({16}); }
  CHECK(cpu_allocator_stats().fresh_allocations == before_small.fresh_allocations);
}

TEST_CASE("a warm training step takes no fresh block from the allocator") {
  manual_seed(3);
  nn::TransformerClassifierOptions options;
  options.vocab_size = 64;
  options.max_len = 32;
  options.num_classes = 3;
  options.num_layers = 2;
  options.layer = {.d_model = 32, .num_heads = 4, .d_ff = 64, .dropout = 0.1, .activation = nn::Activation::GELU,
                   .norm_first = true};
  nn::TransformerClassifier model(options);
  nn::AdamW optimizer(model.parameters(), nn::AdamWOptions{.lr = 1e-3});
  const Tensor ids = randint(0, 64, {16, 32}, TensorOptions(kInt64));  // activations of 64 KiB
  const Tensor labels = randint(0, 3, {16}, TensorOptions(kInt64));
  auto step = [&] {
    optimizer.zero_grad();
    Tensor loss = nn::cross_entropy(model.forward(ids), labels);
    loss.backward();
    optimizer.step();
  };
  for (int i = 0; i < 3; ++i) step();
  const CpuAllocatorStats warm = cpu_allocator_stats();
  for (int i = 0; i < 3; ++i) step();
  const CpuAllocatorStats after = cpu_allocator_stats();
  CHECK(after.fresh_allocations == warm.fresh_allocations);
  CHECK(after.cached_reuses > warm.cached_reuses);
}
