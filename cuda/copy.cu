// The strided, converting copy on the GPU: every dtype pair, any strides, broadcasting. It makes
// tensors contiguous, converts dtypes and writes cat's windows (see cuda/copy.cpp).
#include "cuda/copy_kernels.h"
#include "cuda/elementwise.cuh"

namespace ember::cuda {
namespace {

template <class Out, class In>
struct Convert {
  __device__ Out operator()(In value) const { return static_cast<Out>(value); }
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
  template void launch_convert<Out, bool>(const StridedLayout<2>&, int64_t, Out*, const bool*);
EMBER_INSTANTIATE_CONVERT(float)
EMBER_INSTANTIATE_CONVERT(double)
EMBER_INSTANTIATE_CONVERT(int64_t)
EMBER_INSTANTIATE_CONVERT(bool)
#undef EMBER_INSTANTIATE_CONVERT

}  // namespace ember::cuda
