// The strided, converting copy on the GPU: every dtype pair, any strides, broadcasting. It makes
// tensors contiguous, converts dtypes and writes cat's windows (see cuda/ops/copy.cpp).
#include <type_traits>

#include "core/float_to_int.h"
#include "cuda/ops/copy_kernels.h"
#include "cuda/common/elementwise.cuh"

namespace ember::cuda {
namespace {

// A 16-bit value widens to float exactly; a value becomes 16-bit rounded once to nearest even,
// from a float or from the double itself (round_to: what core/half.h's constructors do on the
// CPU). Between equal 16-bit types the bits move unchanged (a NaN keeps its payload). A floating
// value becomes int64 as on the CPU (core/float_to_int.h), not by the GPU's saturating conversion.
template <class Out, class In>
struct Convert {
  __device__ Out operator()(In value) const {
    if constexpr (std::is_same_v<Out, In> && is_16_bit_element<Out>) return value;
    else if constexpr (is_16_bit_element<Out>) return round_to<Out>(to_compute(value));
    else if constexpr (std::is_same_v<Out, int64_t> && !std::is_integral_v<In>) return float_to_int<int64_t>(to_compute(value));
    else return static_cast<Out>(to_compute(value));
  }
};

}  // namespace

template <class Out, class In>
void launch_convert(const StridedLayout<2>& layout, int64_t n, Out* out, const In* in) {
  launch_elementwise("copy", layout, n, Convert<Out, In>{}, out, in);
}

#define EMBER_INSTANTIATE_CONVERT(Out)                                                                \
  template void launch_convert<Out, float>(const StridedLayout<2>&, int64_t, Out*, const float*);     \
  template void launch_convert<Out, double>(const StridedLayout<2>&, int64_t, Out*, const double*);   \
  template void launch_convert<Out, int64_t>(const StridedLayout<2>&, int64_t, Out*, const int64_t*); \
  template void launch_convert<Out, bool>(const StridedLayout<2>&, int64_t, Out*, const bool*);         \
  template void launch_convert<Out, __nv_bfloat16>(const StridedLayout<2>&, int64_t, Out*,              \
                                                   const __nv_bfloat16*);                                \
  template void launch_convert<Out, __half>(const StridedLayout<2>&, int64_t, Out*, const __half*);
EMBER_INSTANTIATE_CONVERT(float)
EMBER_INSTANTIATE_CONVERT(double)
EMBER_INSTANTIATE_CONVERT(int64_t)
EMBER_INSTANTIATE_CONVERT(bool)
EMBER_INSTANTIATE_CONVERT(__nv_bfloat16)
EMBER_INSTANTIATE_CONVERT(__half)
#undef EMBER_INSTANTIATE_CONVERT

}  // namespace ember::cuda
