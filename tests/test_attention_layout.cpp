// Where the fused CUDA attention kernels find each matrix of each operand
// (cuda/attention/attention_layout.h), checked on the CPU: for heads split off a projection as a view,
// a mask broadcast over heads and queries, and batches with size-1 dims, AttentionLayout's
// offset() must reach the very element the tensor's strides put at (n, row, col). The kernels
// evaluate the same offset(), so what is proved here is what the GPU reads.
#include <array>

#include "cuda/attention/attention_tensor_layout.h"
#include "helpers.h"

namespace ember {
namespace {

using cuda::AttentionLayout;

// Checks every element of every matrix of `x` (a float64 tensor with q's batch dims): the value
// read at the layout's offset from x's first element equals x's own value at (n, row, col).
void check_operand_reached(const AttentionLayout& layout, int operand, const Tensor& x) {
  const Tensor dense = contiguous(x);  // row-major: matrix n, row, col in order
  const double* data = x.data_ptr<double>();
  const double* expected = dense.data_ptr<double>();
  const int64_t rows = x.size(-2), cols = x.size(-1);
  REQUIRE(layout.matrices * rows * cols == x.numel());
  for (int64_t n = 0; n < layout.matrices; ++n) {
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t col = 0; col < cols; ++col) {
        CAPTURE(operand);
        CAPTURE(n);
        CAPTURE(row);
        CAPTURE(col);
        REQUIRE(data[layout.offset(operand, n, row, col)] == expected[(n * rows + row) * cols + col]);
      }
    }
  }
}

TEST_CASE("attention layout: heads split off one projection, a broadcast mask, and permuted gradients") {
  const int64_t B = 3, L = 5, S = 5, H = 2, E = 4;
  // One projection [B, L, 3 * H * E] holds q, k and v side by side; each is split into heads as a
  // view [B, H, L, E] whose batch strides (L * 3HE, E) do not merge.
  const Tensor projection = randn({B, L, 3 * H * E}, kFloat64);
  auto heads = [&](int64_t part) {
    return transpose(view(narrow(projection, 2, part * H * E, H * E), {B, L, H, E}), 1, 2);
  };
  const Tensor q = heads(0), k = heads(1), v = heads(2);
  const Tensor padding = randn({B, 1, 1, S}, kFloat64);
  const Tensor mask = expand(padding, {B, H, L, S});  // strides 0 over heads and queries
  const Tensor out = transpose(randn({B, L, H, E}, kFloat64), 1, 2);  // heads mergeable again
  const Tensor grad_out = randn({B, H, L, E}, kFloat64);
  const Tensor grad_k = permute(randn({H, S, B, E}, kFloat64), {2, 0, 1, 3});
  const Tensor grad_v = transpose(randn({B, H, E, S}, kFloat64), 2, 3);  // column-major matrices

  const AttentionLayout layout =
      cuda::attention_layout({&q, &k, &v, &out, &mask, &grad_out, nullptr, &grad_k, &grad_v});
  CHECK(layout.target_length == L);
  CHECK(layout.source_length == S);
  CHECK(layout.embed == E);
  CHECK(layout.value_embed == E);
  CHECK(layout.matrices == B * H);
  CHECK(layout.batch_dims == 2);
  check_operand_reached(layout, cuda::kAttentionQ, q);
  check_operand_reached(layout, cuda::kAttentionK, k);
  check_operand_reached(layout, cuda::kAttentionV, v);
  check_operand_reached(layout, cuda::kAttentionOut, out);
  check_operand_reached(layout, cuda::kAttentionMask, mask);
  check_operand_reached(layout, cuda::kAttentionGradOut, grad_out);
  check_operand_reached(layout, cuda::kAttentionGradK, grad_k);
  check_operand_reached(layout, cuda::kAttentionGradV, grad_v);
  // An operand a call does not have is never read: its strides stay 0.
  CHECK(layout.row_stride[cuda::kAttentionGradQ] == 0);
  CHECK(layout.matrix_offset(cuda::kAttentionGradQ, B * H - 1) == 0);
}

TEST_CASE("attention layout: size-1 batch dims are dropped, L != S and Ev != E") {
  const Tensor q = randn({1, 3, 1, 4, 6}, kFloat64);
  const Tensor k = transpose(randn({1, 3, 1, 6, 7}, kFloat64), 3, 4);  // [.., S = 7, E = 6], column-major
  const Tensor v = randn({1, 3, 1, 7, 2}, kFloat64);
  const Tensor out = randn({1, 3, 1, 4, 2}, kFloat64);
  const AttentionLayout layout = cuda::attention_layout({&q, &k, &v, &out, nullptr, nullptr, nullptr, nullptr, nullptr});
  CHECK(layout.batch_dims == 1);
  CHECK(layout.matrices == 3);
  CHECK(layout.source_length == 7);
  CHECK(layout.value_embed == 2);
  check_operand_reached(layout, cuda::kAttentionQ, q);
  check_operand_reached(layout, cuda::kAttentionK, k);
  check_operand_reached(layout, cuda::kAttentionV, v);
  check_operand_reached(layout, cuda::kAttentionOut, out);
}

TEST_CASE("attention layout: a single matrix has no batch dims, and too many batch dims are refused") {
  const Tensor q = randn({3, 2}, kFloat64), k = randn({4, 2}, kFloat64), v = randn({4, 5}, kFloat64);
  const Tensor out = randn({3, 5}, kFloat64);
  const AttentionLayout single = cuda::attention_layout({&q, &k, &v, &out, nullptr, nullptr, nullptr, nullptr, nullptr});
  CHECK(single.batch_dims == 0);
  CHECK(single.matrices == 1);
  check_operand_reached(single, cuda::kAttentionQ, q);
  check_operand_reached(single, cuda::kAttentionV, v);

  const Shape nine_dims{2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2};
  const Tensor deep = zeros(nine_dims, kFloat64);
  CHECK_THROWS_WITH_AS(cuda::attention_layout({&deep, &deep, &deep, &deep, nullptr, nullptr, nullptr, nullptr, nullptr}),
                       doctest::Contains("scaled_dot_product_attention: the CUDA kernels take at most 8 batch dims"),
                       Error);
}

}  // namespace
}  // namespace ember
