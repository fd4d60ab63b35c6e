// Building a StridedLayout (cuda/common/strided_layout.h) from Tensors, on the host. The merging of
// dims is the CPU loop's own (cpu::loop_geometry), so both devices walk the same geometry.
#pragma once

#include <array>
#include <string_view>

#include "core/cpu/loops.h"
#include "core/tensor.h"
#include "cuda/common/strided_layout.h"

namespace ember::cuda {

// `out` first, then the inputs, each broadcastable to out's shape.
template <size_t N>
StridedLayout<static_cast<int>(N)> strided_layout(std::string_view op, const std::array<const Tensor*, N>& operands) {
  const cpu::LoopGeometry<N> geometry = cpu::loop_geometry<N>(operands[0]->sizes(), operands);
  const int rank = static_cast<int>(geometry.sizes.size());
  EMBER_CHECK(rank <= kMaxLoopDims, "{}: the CUDA kernels walk at most {} dims after merging, got {} (shape {})",
              op, kMaxLoopDims, rank, shape_str(operands[0]->sizes()));
  StridedLayout<static_cast<int>(N)> layout;
  layout.rank = rank;
  for (int d = 0; d < rank; ++d) {
    layout.sizes[d] = geometry.sizes[d];
    for (size_t k = 0; k < N; ++k) layout.strides[k][d] = geometry.strides[k][d];
  }
  prepare_fast_division(layout);
  return layout;
}

}  // namespace ember::cuda
