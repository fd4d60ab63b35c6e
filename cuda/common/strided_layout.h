// How an elementwise kernel finds element i of each operand: the operands' shapes merged as far
// as their strides allow (a contiguous tensor becomes one dim), with each operand's element
// strides along the merged dims (0 along broadcast dims). Built on the host from Tensors by
// cuda/ops/tensor_layout.h; read on the device by element_offsets() below.
//
// Finding a position along each merged dim divides the flat index by the dims' sizes. A division
// of 64-bit integers is a long software routine on the GPU, dozens of instructions, and a copy
// of a transposed tensor makes three of them per element; so when every index fits in 31 bits
// (a tensor under 2^31 elements, nearly always) the divisions are done by FastDivider: a
// multiply-high, an add and a shift, with the multiplier worked out once on the host
// (Granlund and Montgomery's division by invariant integers).
//
// Plain C++, fmt-free: the kernels and the CPU test (tests/test_strided_layout.cpp) run the very
// same element_offsets().
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define EMBER_LAYOUT_HOST_DEVICE __host__ __device__
#else
#define EMBER_LAYOUT_HOST_DEVICE
#endif

namespace ember::cuda {

// More merged dims than this is an error (raised on the host): no op of ember comes close.
inline constexpr int kMaxLoopDims = 10;

// The largest dividend and divisor FastDivider takes: 2^31 - 1, so that the sum in quotient()
// cannot pass 2^32.
inline constexpr int64_t kMaxFastDividend = INT32_MAX;

// n / divisor for 0 <= n <= kMaxFastDividend and 1 <= divisor <= kMaxFastDividend, as
// (mulhi(n, multiplier) + n) >> shift, where shift = ceil(log2(divisor)) and multiplier =
// floor(2^32 (2^shift - divisor) / divisor) + 1.
struct FastDivider {
  uint32_t divisor = 1;
  uint32_t multiplier = 1;
  uint32_t shift = 0;
};

// On the host, once per divisor.
inline FastDivider make_fast_divider(uint32_t divisor) {
  uint32_t shift = 0;
  while ((uint64_t{1} << shift) < divisor) ++shift;
  const uint64_t multiplier = (uint64_t{1} << 32) * ((uint64_t{1} << shift) - divisor) / divisor + 1;
  return {divisor, static_cast<uint32_t>(multiplier), shift};
}

EMBER_LAYOUT_HOST_DEVICE inline uint32_t fast_quotient(const FastDivider& by, uint32_t n) {
#ifdef __CUDA_ARCH__
  const uint32_t high = __umulhi(n, by.multiplier);
#else
  const uint32_t high = static_cast<uint32_t>((uint64_t{n} * by.multiplier) >> 32);
#endif
  return (high + n) >> by.shift;
}

// N operands; operand 0 is the output. Passed to kernels by value.
template <int N>
struct StridedLayout {
  int rank = 1;
  bool divides_in_32_bits = false;  // set by prepare_fast_division: dividers[] hold the sizes
  int64_t sizes[kMaxLoopDims] = {};
  FastDivider dividers[kMaxLoopDims] = {};
  int64_t strides[N][kMaxLoopDims] = {};
};

// On the host, once the sizes are set: the 32-bit dividers, when the layout has more than one dim
// and fewer than 2^31 elements (every flat index, and every size, then fits in 31 bits).
template <int N>
void prepare_fast_division(StridedLayout<N>& layout) {
  int64_t elements = 1;
  bool fits = true;
  for (int d = 0; d < layout.rank && fits; ++d) {  // the product, checked before it can overflow
    const int64_t size = layout.sizes[d];
    fits = size == 0 || elements <= kMaxFastDividend / size;
    elements *= size;
  }
  layout.divides_in_32_bits = layout.rank > 1 && fits;
  if (!layout.divides_in_32_bits) return;
  for (int d = 0; d < layout.rank; ++d) {
    layout.dividers[d] = make_fast_divider(static_cast<uint32_t>(layout.sizes[d] > 0 ? layout.sizes[d] : 1));
  }
}

// The element offsets of flat (row-major) index `index` in every operand.
template <int N>
EMBER_LAYOUT_HOST_DEVICE inline void element_offsets(const StridedLayout<N>& layout, int64_t index,
                                                     int64_t (&offset)[N]) {
  if (layout.rank == 1) {  // the common, contiguous or simply strided case: no division
    for (int k = 0; k < N; ++k) offset[k] = index * layout.strides[k][0];
    return;
  }
  for (int k = 0; k < N; ++k) offset[k] = 0;
  if (layout.divides_in_32_bits) {
    uint32_t rest = static_cast<uint32_t>(index);
    for (int d = layout.rank - 1; d >= 0; --d) {
      const uint32_t next = fast_quotient(layout.dividers[d], rest);
      const int64_t position = rest - next * layout.dividers[d].divisor;
      rest = next;
      for (int k = 0; k < N; ++k) offset[k] += position * layout.strides[k][d];
    }
    return;
  }
  for (int d = layout.rank - 1; d >= 0; --d) {
    const int64_t size = layout.sizes[d];
    const int64_t position = index % size;
    index /= size;
    for (int k = 0; k < N; ++k) offset[k] += position * layout.strides[k][d];
  }
}

}  // namespace ember::cuda

#undef EMBER_LAYOUT_HOST_DEVICE
