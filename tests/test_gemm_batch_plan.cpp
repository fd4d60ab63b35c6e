// How CUDA matrix products reach cuBLAS in one call (cuda/common/gemm_batch_plan.h), checked on the
// CPU: the merged layout must address every matrix of every operand exactly where the tensor's
// own strides put it, for any batch layout, and must take the strided-batched form whenever
// one stride per operand does. The pointer-array kernel evaluates the same offset() function,
// so what is proved here is what the GPU computes.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/common/gemm_batch_plan.h"

namespace {

using ember::cuda::GemmBatchLayout;
using ember::cuda::kOperandA;
using ember::cuda::kOperandB;
using ember::cuda::kOperandC;
using ember::cuda::plan_gemm_batch;

using Dims = std::vector<int64_t>;

// The offset of matrix `index` of a batch, walked over the original (unmerged) dims: the
// reference the merged layout must reproduce.
int64_t reference_offset(const Dims& sizes, const Dims& strides, int64_t index) {
  int64_t offset = 0;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    offset += (index % sizes[d]) * strides[d];
    index /= sizes[d];
  }
  return offset;
}

Dims row_major_strides(const Dims& sizes, int64_t matrix_size) {
  Dims strides(sizes.size());
  int64_t stride = matrix_size;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  return strides;
}

GemmBatchLayout plan(const Dims& sizes, const Dims& a, const Dims& b, const Dims& c) {
  return plan_gemm_batch(static_cast<int>(sizes.size()), sizes.data(), a.data(), b.data(), c.data());
}

// Every matrix of every operand where the unmerged strides put it, and the count right.
void check_addresses(const Dims& sizes, const Dims& a, const Dims& b, const Dims& c) {
  const GemmBatchLayout layout = plan(sizes, a, b, c);
  const int64_t count = std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
  REQUIRE(layout.dims >= 0);
  CHECK(layout.count == count);
  for (int64_t i = 0; i < count; ++i) {
    CHECK(layout.offset(kOperandA, i) == reference_offset(sizes, a, i));
    CHECK(layout.offset(kOperandB, i) == reference_offset(sizes, b, i));
    CHECK(layout.offset(kOperandC, i) == reference_offset(sizes, c, i));
    if (layout.is_strided()) {
      CHECK(i * layout.batch_stride(kOperandA) == reference_offset(sizes, a, i));
      CHECK(i * layout.batch_stride(kOperandB) == reference_offset(sizes, b, i));
      CHECK(i * layout.batch_stride(kOperandC) == reference_offset(sizes, c, i));
    }
  }
}

TEST_CASE("contiguous batches of any rank merge to one strided-batched call") {
  for (const Dims& sizes : {Dims{}, Dims{7}, Dims{2, 3}, Dims{2, 3, 4}, Dims{1, 5, 1, 2}}) {
    const Dims a = row_major_strides(sizes, 6 * 4), b = row_major_strides(sizes, 4 * 5),
               c = row_major_strides(sizes, 6 * 5);
    const GemmBatchLayout layout = plan(sizes, a, b, c);
    CHECK(layout.is_strided());
    check_addresses(sizes, a, b, c);
  }
}

TEST_CASE("an operand broadcast over the whole batch keeps the strided form with stride 0") {
  const Dims sizes{3, 4};
  const Dims weight{0, 0};  // linear's weight, shared by every matrix
  const Dims a = row_major_strides(sizes, 8 * 16), c = row_major_strides(sizes, 8 * 5);
  const GemmBatchLayout layout = plan(sizes, a, weight, c);
  CHECK(layout.is_strided());
  CHECK(layout.batch_stride(kOperandB) == 0);
  check_addresses(sizes, a, weight, c);
}

TEST_CASE("heads split off a projection as views need the pointer-array form, and address every head") {
  // q, k [B, H, L, E] as views of a packed [B, L, 3 * H * E] projection: batch strides
  // (L * 3HE, E). The scores [B, H, L, L] are contiguous. Dims B and H cannot merge.
  const int64_t B = 4, H = 3, L = 5, E = 2;
  const Dims sizes{B, H};
  const Dims q{L * 3 * H * E, E}, k_transposed{L * 3 * H * E, E}, scores = row_major_strides(sizes, L * L);
  const GemmBatchLayout layout = plan(sizes, q, k_transposed, scores);
  CHECK_FALSE(layout.is_strided());
  CHECK(layout.dims == 2);
  check_addresses(sizes, q, k_transposed, scores);
}

TEST_CASE("size-1 dims with any stride are dropped, and a batch with a zero-size dim is empty") {
  const Dims sizes{1, 6, 1};
  const Dims a{12345, 40, 999}, b{7, 0, 3}, c{1, 30, 77};
  const GemmBatchLayout layout = plan(sizes, a, b, c);
  CHECK(layout.is_strided());
  CHECK(layout.batch_stride(kOperandA) == 40);
  CHECK(layout.batch_stride(kOperandB) == 0);
  check_addresses(sizes, a, b, c);
  const GemmBatchLayout empty = plan(Dims{3, 0, 2}, Dims{10, 5, 1}, Dims{10, 5, 1}, Dims{10, 5, 1});
  CHECK(empty.count == 0);
  CHECK(empty.is_strided());
}

TEST_CASE("a broadcast dim in the middle of the batch merges only where the strides allow") {
  // a [2, 1->3, 4] expanded over its middle dim: strides (4 * 12, 0, 12). The inner two dims
  // cannot merge for a (0 != 12 * 4), the outer two cannot either.
  const Dims sizes{2, 3, 4};
  const Dims a{48, 0, 12}, b = row_major_strides(sizes, 20), c = row_major_strides(sizes, 15);
  const GemmBatchLayout layout = plan(sizes, a, b, c);
  CHECK(layout.dims == 3);
  check_addresses(sizes, a, b, c);
}

TEST_CASE("random permuted, sliced and broadcast batch layouts are addressed exactly") {
  std::mt19937_64 random(20261125);
  for (int trial = 0; trial < 400; ++trial) {
    const int rank = static_cast<int>(random() % 6);
    Dims sizes(rank);
    for (int64_t& size : sizes) size = 1 + static_cast<int64_t>(random() % 4);
    auto random_strides = [&](int64_t matrix_size) {
      // A contiguous block, its dims permuted, some dims sliced (a larger stride), some
      // broadcast (stride 0).
      Dims order(rank);
      std::iota(order.begin(), order.end(), int64_t{0});
      std::shuffle(order.begin(), order.end(), random);
      Dims strides(rank);
      int64_t stride = matrix_size;
      for (int64_t d = rank - 1; d >= 0; --d) {
        strides[order[d]] = stride;
        stride *= sizes[order[d]] + static_cast<int64_t>(random() % 2);
      }
      for (int64_t& s : strides) {
        if (random() % 5 == 0) s = 0;
      }
      return strides;
    };
    // The output is contiguous in every product ember makes, but the plan must not rely on it.
    const Dims a = random_strides(6), b = random_strides(10), c = random_strides(15);
    INFO("trial " << trial);
    check_addresses(sizes, a, b, c);
  }
}

TEST_CASE("more non-mergeable dims than the layout holds are reported, not truncated") {
  // Dims of size 2 whose strides alternate so that no two neighbours merge.
  const int rank = ember::cuda::kMaxGemmBatchDims + 1;
  Dims sizes(rank, 2), a(rank), b(rank), c(rank);
  for (int d = 0; d < rank; ++d) {
    a[d] = (d % 2 == 0) ? 1000 + d : 3;
    b[d] = 0;
    c[d] = int64_t{1} << (rank - 1 - d);
  }
  CHECK(plan(sizes, a, b, c).dims == -1);
}

TEST_CASE("16-bit pointer arrays: every matrix aligned exactly when the base and every merged stride are") {
  using ember::cuda::batch_pointers_aligned;
  // Heads split off a projection: q [B 2, H 3, L 4, E] viewed in [B, L, 3 * E]-sized rows, so
  // the batch strides (L * H * E, E) do not merge; E = 8 bfloat16s is 16 bytes, E = 6 is 12.
  for (const int64_t head : {int64_t{6}, int64_t{8}, int64_t{12}, int64_t{16}}) {
    const Dims sizes = {2, 3};
    const Dims q = {4 * 3 * head, head}, c = row_major_strides(sizes, 4 * 4);
    const GemmBatchLayout layout = plan(sizes, q, q, c);
    REQUIRE(layout.dims == 2);
    for (const uint64_t base : {uint64_t{4096}, uint64_t{4096 + 2}, uint64_t{4096 + 16}}) {
      INFO("head " << head << ", base " << base);
      // The reference: every matrix's own address, one by one.
      bool every_matrix_aligned = true;
      for (int64_t i = 0; i < layout.count; ++i) {
        every_matrix_aligned = every_matrix_aligned && (base + 2 * layout.offset(kOperandA, i)) % 16 == 0;
      }
      CHECK(batch_pointers_aligned(layout, kOperandA, base, 2, 16) == every_matrix_aligned);
      CHECK(every_matrix_aligned == (base % 16 == 0 && head % 8 == 0));
    }
  }
  // A broadcast operand (stride 0) is aligned when its base is; a single product has no stride.
  const GemmBatchLayout broadcast = plan({2, 3}, {0, 0}, {3 * 20, 20}, {3 * 20, 20});
  CHECK(batch_pointers_aligned(broadcast, kOperandA, 32, 2, 16));
  CHECK_FALSE(batch_pointers_aligned(broadcast, kOperandA, 34, 2, 16));
  const GemmBatchLayout single = plan({}, {}, {}, {});
  CHECK(batch_pointers_aligned(single, kOperandC, 48, 2, 16));
}

}  // namespace
