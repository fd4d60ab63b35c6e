// How the fused multi-tensor kernels (the optimizer steps, the gradients' unscale) are fed: the
// tensors of a call packed, per dtype, into lists of up to a fixed number that travel to the
// kernel as a by-value argument, one launch per list.
#pragma once

#include <span>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace ember::cuda {

// The dtypes these kernels take, one list (and launch) per dtype present.
inline constexpr DType kFloatingDTypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16};

inline void check_contiguous(const char* op, const Tensor& x, const char* what, size_t index) {
  EMBER_CHECK(x.is_contiguous(), "{}: the CUDA kernel needs contiguous tensors, but {} {} of shape {} is strided", op,
              what, index, shape_str(x.sizes()));
}

// Calls add(list, i) for every index whose tensor has dtype T, and launch(list) for every
// List::kCapacity of them and for the rest.
template <class List, class Add, class Launch>
void in_lists(std::span<const Tensor> tensors, DType dtype, Add add, Launch launch) {
  List list;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].dtype() != dtype) continue;
    add(list, i);
    ++list.count;
    if (list.count == List::kCapacity) {
      launch(list);
      list.count = 0;
    }
  }
  if (list.count > 0) launch(list);
}

}  // namespace ember::cuda
