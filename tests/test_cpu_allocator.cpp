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
