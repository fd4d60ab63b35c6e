// How the CUDA elementwise kernels find each operand's element (cuda/common/strided_layout.h), checked
// on the CPU: FastDivider's quotients against the division they replace, and the offsets that
// element_offsets() computes from layouts built by cuda::strided_layout() for real views
// (transposes, broadcasts, narrowed windows) against each tensor's own strides, through both the
// 32-bit and the 64-bit paths. The kernels call the very same element_offsets().
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/ops/tensor_layout.h"
#include "ember.h"

namespace {

using ember::Shape;
using ember::Tensor;
using ember::cuda::element_offsets;
using ember::cuda::fast_quotient;
using ember::cuda::FastDivider;
using ember::cuda::kMaxFastDividend;
using ember::cuda::make_fast_divider;

void check_quotients(uint32_t divisor, const std::vector<int64_t>& dividends) {
  const FastDivider by = make_fast_divider(divisor);
  for (const int64_t n : dividends) {
    if (n < 0 || n > kMaxFastDividend) continue;
    const uint32_t expected = static_cast<uint32_t>(n / divisor), got = fast_quotient(by, static_cast<uint32_t>(n));
    if (got != expected) {
      FAIL_CHECK(n << " / " << divisor << ": " << got << ", not " << expected);
      return;
    }
  }
}

// Dividends around multiples of the divisor, where a wrong multiplier shows first.
std::vector<int64_t> dividends_for(int64_t divisor, std::mt19937_64& random) {
  std::vector<int64_t> n = {0, 1, divisor - 1, divisor, divisor + 1, kMaxFastDividend, kMaxFastDividend - 1};
  const int64_t most = kMaxFastDividend / divisor;
  for (int i = 0; i < 64; ++i) {
    const int64_t k = static_cast<int64_t>(random() % static_cast<uint64_t>(most + 1));
    for (int64_t delta : {-1, 0, 1}) n.push_back(k * divisor + delta);
    n.push_back(static_cast<int64_t>(random() % static_cast<uint64_t>(kMaxFastDividend + 1)));
  }
  return n;
}

// The offset of flat index `index` of `out`'s shape in `t`, broadcast to it, from t's strides.
int64_t reference_offset(const Tensor& t, const Shape& shape, int64_t index) {
  int64_t offset = 0;
  const size_t lead = shape.size() - static_cast<size_t>(t.dim());
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t position = index % shape[d];
    index /= shape[d];
    if (d < lead || t.sizes()[d - lead] == 1) continue;
    offset += position * t.strides()[d - lead];
  }
  return offset;
}

// Every element of `operands[0]`'s shape (or a random sample of a large one), both paths.
template <size_t N>
void check_layout(const std::array<const Tensor*, N>& operands, const char* what) {
  INFO(what);
  auto layout = ember::cuda::strided_layout<N>("test", operands);
  const Shape& shape = operands[0]->sizes();
  const int64_t total = operands[0]->numel();
  CHECK(layout.divides_in_32_bits == (layout.rank > 1));
  auto wide = layout;
  wide.divides_in_32_bits = false;
  std::mt19937_64 random(11);
  const int64_t samples = std::min<int64_t>(total, 20000);
  for (int64_t s = 0; s < samples; ++s) {
    const int64_t index = samples == total ? s : static_cast<int64_t>(random() % static_cast<uint64_t>(total));
    int64_t fast[N], slow[N];
    element_offsets(layout, index, fast);
    element_offsets(wide, index, slow);
    for (size_t k = 0; k < N; ++k) {
      const int64_t expected = reference_offset(*operands[k], shape, index);
      if (fast[k] != expected || slow[k] != expected) {
        FAIL_CHECK("index " << index << ", operand " << k << ": " << fast[k] << " (32-bit) and " << slow[k]
                            << " (64-bit), not " << expected);
        return;
      }
    }
  }
}

}  // namespace

TEST_CASE("FastDivider gives the quotient of every dividend the kernels can pass") {
  std::mt19937_64 random(5);
  for (int64_t divisor = 1; divisor <= 3000; ++divisor) check_quotients(static_cast<uint32_t>(divisor), dividends_for(divisor, random));
  for (int shift = 12; shift <= 31; ++shift) {
    for (int64_t delta : {-3, -1, 0, 1, 3}) {
      const int64_t divisor = (int64_t{1} << shift) + delta;
      if (divisor >= 1 && divisor <= kMaxFastDividend) {
        check_quotients(static_cast<uint32_t>(divisor), dividends_for(divisor, random));
      }
    }
  }
  for (int i = 0; i < 3000; ++i) {
    const int64_t divisor = 1 + static_cast<int64_t>(random() % static_cast<uint64_t>(kMaxFastDividend));
    check_quotients(static_cast<uint32_t>(divisor), dividends_for(divisor, random));
  }
}

TEST_CASE("element offsets of transposed, broadcast and narrowed operands match their strides") {
  ember::manual_seed(3);
  // A copy that merges heads: [B, H, L, E] read as [B, L, H, E].
  const Tensor heads = ember::randn({3, 4, 5, 6});
  const Tensor merged = ember::empty({3, 5, 4, 6});
  const Tensor heads_view = heads.transpose(1, 2);
  check_layout<2>({&merged, &heads_view}, "heads merged");
  // A transpose of a matrix, and of a narrowed window of one.
  const Tensor matrix = ember::randn({37, 29});
  const Tensor transposed = ember::empty({29, 37});
  const Tensor matrix_t = matrix.t();
  check_layout<2>({&transposed, &matrix_t}, "transposed");
  const Tensor window = matrix.narrow(0, 3, 30).narrow(1, 2, 20).t();
  const Tensor window_out = ember::empty({20, 30});
  check_layout<2>({&window_out, &window}, "narrowed and transposed");
  // A binary op broadcasting a row and a column, and one against a permuted 4-dim view.
  const Tensor out = ember::empty({7, 11, 13});
  const Tensor row = ember::randn({13}), column = ember::randn({7, 11, 1});
  check_layout<3>({&out, &column, &row}, "broadcast row and column");
  const Tensor big = ember::randn({2, 3, 4, 5, 7});
  const Tensor permuted = big.permute({4, 2, 0, 3, 1});
  const Tensor permuted_out = ember::empty({7, 4, 2, 5, 3});
  const Tensor scale = ember::randn({4, 1, 5, 1});
  check_layout<3>({&permuted_out, &permuted, &scale}, "permuted, with a broadcast operand");
  // A contiguous operand merges to one dim: no division at all.
  const Tensor flat_out = ember::empty({8, 9}), flat_in = ember::randn({8, 9});
  check_layout<2>({&flat_out, &flat_in}, "contiguous");
}

TEST_CASE("layouts of 2^31 elements or more keep 64-bit division") {
  ember::cuda::StridedLayout<2> layout;
  layout.rank = 2;
  layout.sizes[0] = int64_t{1} << 16;
  layout.sizes[1] = int64_t{1} << 15;  // 2^31 elements: the largest flat index needs 32 bits
  ember::cuda::prepare_fast_division(layout);
  CHECK_FALSE(layout.divides_in_32_bits);
  layout.sizes[1] = (int64_t{1} << 15) - 1;
  ember::cuda::prepare_fast_division(layout);
  CHECK(layout.divides_in_32_bits);
  // Sizes whose product overflows int64 are caught before multiplying.
  layout.rank = 3;
  layout.sizes[0] = layout.sizes[1] = layout.sizes[2] = int64_t{1} << 40;
  ember::cuda::prepare_fast_division(layout);
  CHECK_FALSE(layout.divides_in_32_bits);
}
