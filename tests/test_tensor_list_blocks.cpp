// How the multi-tensor kernels (optimizer steps, gradient unscale) share their blocks among a
// list's tensors (cuda/common/tensor_list_blocks.h), checked on the CPU: every block maps to the tensor
// whose run holds it, no tensor gets more blocks than its elements need, and the kernels' loop
// over a tensor's run (first index local_block * threads + thread, stride blocks * threads)
// visits each element exactly once.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "cuda/common/tensor_list_blocks.h"

namespace {

using ember::cuda::kMaxBlocksPerTensor;
using ember::cuda::plan_tensor_list_blocks;
using ember::cuda::TensorListBlocks;

constexpr int kCapacity = 24;

// Runs the kernels' indexing over every block and thread of the plan, counting visits.
void check_every_element_once(const std::vector<int64_t>& sizes, int threads) {
  const auto plan = plan_tensor_list_blocks<kCapacity>(sizes.data(), static_cast<int>(sizes.size()), threads);
  std::vector<std::vector<int>> visits;
  for (const int64_t size : sizes) visits.emplace_back(static_cast<size_t>(size), 0);
  for (int64_t block = 0; block < plan.total(); ++block) {
    const int t = plan.tensor_of(block);
    REQUIRE(t >= 0);
    REQUIRE(t < plan.count);
    CHECK(plan.first[t] <= block);
    CHECK(block < plan.first[t + 1]);
    const int64_t local = block - plan.first[t], stride = plan.blocks_of(t) * threads;
    for (int thread = 0; thread < threads; ++thread) {
      for (int64_t i = local * threads + thread; i < sizes[static_cast<size_t>(t)]; i += stride) {
        ++visits[static_cast<size_t>(t)][static_cast<size_t>(i)];
      }
    }
  }
  for (size_t t = 0; t < sizes.size(); ++t) {
    INFO("tensor " << t << " of " << sizes[t] << " elements");
    for (const int count : visits[t]) {
      if (count != 1) {
        FAIL_CHECK("an element visited " << count << " times");
        break;
      }
    }
    // Blocks only where there is work: every block's first index is inside its tensor.
    CHECK(plan.blocks_of(static_cast<int>(t)) == (sizes[t] + threads - 1) / threads);
  }
}

}  // namespace

TEST_CASE("a list's blocks follow its tensors' sizes, and every element is visited once") {
  // An embedding table, then biases and norms: the list an optimizer step makes.
  check_every_element_once({1000, 7, 64, 64, 1, 300}, 32);
  // Tensors of no elements own no block, wherever they sit in the list.
  check_every_element_once({0, 5, 0, 0, 70, 0}, 8);
  check_every_element_once({0}, 8);
  check_every_element_once({}, 8);
  check_every_element_once({255, 256, 257}, 256);
}

TEST_CASE("a tensor past kMaxBlocksPerTensor blocks loops over the rest") {
  const int64_t huge = kMaxBlocksPerTensor * 256 * 3 + 17;
  const std::vector<int64_t> sizes = {huge, 10};
  const auto plan = plan_tensor_list_blocks<kCapacity>(sizes.data(), 2, 256);
  CHECK(plan.blocks_of(0) == kMaxBlocksPerTensor);
  CHECK(plan.blocks_of(1) == 1);
  CHECK(plan.total() == kMaxBlocksPerTensor + 1);
  CHECK(plan.tensor_of(kMaxBlocksPerTensor - 1) == 0);
  CHECK(plan.tensor_of(kMaxBlocksPerTensor) == 1);
  // The last block of the huge tensor: its thread 255 visits indices 256 * (blocks - 1) + 255,
  // then every blocks * 256 after, the last under `huge`.
  const int64_t stride = kMaxBlocksPerTensor * 256, first = (kMaxBlocksPerTensor - 1) * 256 + 255;
  CHECK((huge - 1 - first) / stride == 2);  // three visits: the tensor is three strides and a bit
}

TEST_CASE("a full list of the optimizer's capacity") {
  std::vector<int64_t> sizes;
  for (int t = 0; t < kCapacity; ++t) sizes.push_back((t * 37) % 91);
  check_every_element_once(sizes, 16);
}
